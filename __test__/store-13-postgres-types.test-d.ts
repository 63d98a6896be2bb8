// Type-level contract of PostgresSessionStore (issue 13): exported beside
// the other stores from both entries, a DurableSessionStore, its options.

import { describe, expectTypeOf, it } from 'vitest'
import { PostgresSessionStore as FromEsm } from '../index.mjs'
import {
  PostgresSessionStore,
  type DurableSessionStore,
  type PostgresSessionStoreOptions,
  type SessionHeader,
  type StoredSession,
} from '../index.js'

describe('PostgresSessionStore types', () => {
  it('is exported from the ES module entry too, and is a DurableSessionStore', () => {
    expectTypeOf(FromEsm).toEqualTypeOf<typeof PostgresSessionStore>()
    expectTypeOf<PostgresSessionStore>().toMatchTypeOf<DurableSessionStore>()
    expectTypeOf(PostgresSessionStore).constructorParameters.toEqualTypeOf<[options: PostgresSessionStoreOptions]>()
  })

  it('takes a connection string and optional schema, pool size and timeouts', () => {
    expectTypeOf<PostgresSessionStoreOptions['connectionString']>().toEqualTypeOf<string>()
    expectTypeOf<PostgresSessionStoreOptions['schema']>().toEqualTypeOf<string | undefined>()
    expectTypeOf<PostgresSessionStoreOptions['poolSize']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<PostgresSessionStoreOptions['leaseMs']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<PostgresSessionStoreOptions['statementTimeoutMs']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<PostgresSessionStoreOptions['connectTimeoutMs']>().toEqualTypeOf<number | undefined>()
    // @ts-expect-error the connection string is required
    void new PostgresSessionStore({ schema: 'x' })
  })

  it('has the store methods, locate always undefined', () => {
    const store = new PostgresSessionStore({ connectionString: 'postgres://localhost/db' })
    expectTypeOf(store.load).returns.toEqualTypeOf<Promise<StoredSession>>()
    expectTypeOf(store.list).returns.toEqualTypeOf<Promise<SessionHeader[]>>()
    expectTypeOf(store.locate).returns.toEqualTypeOf<undefined>()
  })
})
