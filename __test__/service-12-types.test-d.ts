// Type-level contract of the SessionStore service (SPEC 12.1): the class as
// the default export, `ctx.sessions`, and the four events with their
// listener arguments (cordis named `cordis`: service-12-install.test.ts).

import { Context, Service } from '@deepseek-ai/cordis'
import type { Scoped } from '@deepseek-ai/dsh-scope'
import { describe, expectTypeOf, it } from 'vitest'
import SessionStoreDefault from '../index.mjs'
import {
  Session,
  SessionForkError,
  SessionStore,
  type CreateSessionOptions,
  type DurableSessionStore,
  type JsonlSessionStore,
  type SessionEvent,
  type SessionForkErrorCode,
  type SessionForkSource,
  type SessionHeader,
  type SessionId,
  type SessionOptions,
} from '../index.js'

declare const ctx: Context

describe('exports', () => {
  it('the ESM default export is the SessionStore class, a cordis Service', () => {
    expectTypeOf(SessionStoreDefault).toEqualTypeOf<typeof SessionStore>()
    expectTypeOf<SessionStore>().toMatchTypeOf<Service>()
    expectTypeOf(SessionStore).constructorParameters.toEqualTypeOf<[ctx: Context]>()
  })

  it('SessionForkError carries a typed code', () => {
    expectTypeOf<SessionForkError>().toMatchTypeOf<Error>()
    expectTypeOf<SessionForkError['code']>().toEqualTypeOf<SessionForkErrorCode>()
    expectTypeOf<SessionForkErrorCode>().toEqualTypeOf<
      'SESSION_NOT_FOUND' | 'SESSION_NOT_LIVE' | 'SESSION_ALREADY_EXISTS' | 'INVALID_BOUNDARY' | 'OPEN_TURN'
    >()
    expectTypeOf(SessionForkError).constructorParameters.toEqualTypeOf<[message: string, code: SessionForkErrorCode]>()
  })

  it('CreateSessionOptions and SessionForkSource', () => {
    expectTypeOf<CreateSessionOptions['seed']>().toEqualTypeOf<readonly SessionEvent[] | undefined>()
    // A resume continues a session's log as it is (issue 20).
    expectTypeOf<CreateSessionOptions['from']>().toEqualTypeOf<Session | undefined>()
    expectTypeOf(Session).constructorParameters.toEqualTypeOf<
      [id: SessionId | string, seed?: readonly SessionEvent[] | Session, header?: SessionHeader, options?: SessionOptions]
    >()
    expectTypeOf<NonNullable<CreateSessionOptions['meta']>['parentSession']>().toEqualTypeOf<SessionId | undefined>()
    expectTypeOf<SessionForkSource>().toEqualTypeOf<Session | SessionId>()
  })

  it('the durable-store interface is DurableSessionStore', () => {
    expectTypeOf<JsonlSessionStore>().toMatchTypeOf<DurableSessionStore>()
    expectTypeOf<DurableSessionStore['flush']>().returns.toEqualTypeOf<Promise<number>>()
  })
})

describe('ctx.sessions', () => {
  it('is typed as the store, with its methods', () => {
    expectTypeOf(ctx.sessions).toEqualTypeOf<SessionStore>()
    expectTypeOf(ctx.sessions.create).returns.toEqualTypeOf<Session>()
    expectTypeOf(ctx.sessions.prepare).returns.toEqualTypeOf<Session>()
    expectTypeOf(ctx.sessions.enter).returns.toEqualTypeOf<() => void>()
    expectTypeOf(ctx.sessions.announce).returns.toEqualTypeOf<void>()
    expectTypeOf(ctx.sessions.flush).returns.toEqualTypeOf<Promise<void>>()
    expectTypeOf(ctx.sessions.get).returns.toEqualTypeOf<Session | undefined>()
    expectTypeOf(ctx.sessions.list).returns.toEqualTypeOf<Session[]>()
    expectTypeOf(ctx.sessions.fork).returns.toEqualTypeOf<Session>()
    expectTypeOf(ctx.sessions.fork).parameter(1).toEqualTypeOf<number | undefined>()
  })

  it('ctx.plugin accepts the class', () => {
    expectTypeOf(ctx.plugin(SessionStoreDefault)).toHaveProperty('dispose')
  })
})

describe('session events', () => {
  it('session/event infers (session, event) and this is the scope carrier', () => {
    ctx.on('session/event', function (session, event) {
      expectTypeOf(session).toEqualTypeOf<Session>()
      expectTypeOf(event).toEqualTypeOf<SessionEvent>()
      expectTypeOf(this).toEqualTypeOf<Scoped<Session>>()
    })
  })

  it('session/created and session/disposed infer (session)', () => {
    ctx.on('session/created', (session) => expectTypeOf(session).toEqualTypeOf<Session>())
    ctx.on('session/disposed', (session) => expectTypeOf(session).toEqualTypeOf<Session>())
  })

  it('session/flush listeners may return a promise', () => {
    ctx.on('session/flush', async (session) => {
      expectTypeOf(session).toEqualTypeOf<Session>()
    })
    // @ts-expect-error a session/event listener takes no third argument
    ctx.on('session/event', (_session: Session, _event: SessionEvent, _extra: string) => {})
  })
})
