// lib/stores.js is re-exported by index.js; its types are declared in index.d.ts.
export { JsonlSessionStore, SqliteSessionStore, PostgresSessionStore } from '../index'
export type {
  JsonlSessionStoreOptions,
  SessionLocation,
  DurableSessionStore,
  SqliteJournalMode,
  SqliteSessionStoreOptions,
  PostgresSessionStoreOptions,
  StoredSession,
} from '../index'
/** Internal (dsh-session repair): load `id` as its writer; rejects with `SESSION_IN_USE` while another store holds it. */
export declare function loadAsWriter(store: unknown, id: string): Promise<unknown>
