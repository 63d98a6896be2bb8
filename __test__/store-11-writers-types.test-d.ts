// Type-level contract of the stores' load and open options (issue 29): a
// reader by default, `{ write: true }` for the session's writer.

import { describe, expectTypeOf, it } from 'vitest'
import {
  JsonlSessionStore,
  PostgresSessionStore,
  SqliteSessionStore,
  type DurableSessionStore,
  type Session,
  type SessionId,
  type StoreLoadOptions,
  type StoredSession,
} from '../index.js'
import type { StoreLoadOptions as FromEsm } from '../index.mjs'

describe('StoreLoadOptions', () => {
  it('is one optional boolean, exported from both entries', () => {
    expectTypeOf<StoreLoadOptions>().toEqualTypeOf<{ write?: boolean }>()
    expectTypeOf<FromEsm>().toEqualTypeOf<StoreLoadOptions>()
  })

  it('is the optional second parameter of load and open on every store', () => {
    for (const store of [
      new JsonlSessionStore({ root: '/tmp/x' }),
      new SqliteSessionStore({ path: ':memory:' }),
      new PostgresSessionStore({ connectionString: 'postgres://localhost/db' }),
    ] as const) {
      expectTypeOf(store.load).parameters.toEqualTypeOf<[id: SessionId | string, options?: StoreLoadOptions]>()
      expectTypeOf(store.open).parameters.toEqualTypeOf<[id: SessionId | string, options?: StoreLoadOptions]>()
      expectTypeOf(store.load).returns.toEqualTypeOf<Promise<StoredSession>>()
      expectTypeOf(store.open).returns.toEqualTypeOf<Promise<Session>>()
    }
    expectTypeOf<DurableSessionStore['open']>().parameters.toEqualTypeOf<[id: SessionId | string, options?: StoreLoadOptions]>()
    const store = new JsonlSessionStore({ root: '/tmp/x' })
    void store.open('s', { write: true })
    // @ts-expect-error write is a boolean
    void store.open('s', { write: 'yes' })
    // @ts-expect-error no other option
    void store.load('s', { writer: true })
  })
})
