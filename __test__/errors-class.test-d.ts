// Type-level contract of SessionError (issue 30): a class exported from both
// entries, the parent of SessionForkError, with a typed `code`.

import { describe, expectTypeOf, it } from 'vitest'
import { SessionError as EsmSessionError } from '../index.mjs'
import { SessionError, SessionForkError, type SessionErrorCode } from '../index.js'

describe('SessionError', () => {
  it('is a class extending Error, with a typed code and the optional line and errno', () => {
    expectTypeOf<SessionError>().toMatchTypeOf<Error>()
    expectTypeOf<SessionError['code']>().toEqualTypeOf<SessionErrorCode>()
    expectTypeOf<SessionError['line']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<SessionError['errno']>().toEqualTypeOf<number | undefined>()
    expectTypeOf(SessionError).constructorParameters.toEqualTypeOf<
      [message: string, code: SessionErrorCode, options?: { cause?: unknown }]
    >()
    expectTypeOf(EsmSessionError).toEqualTypeOf<typeof SessionError>()
  })

  it('narrows an unknown error with instanceof, and SessionForkError is one', () => {
    const error: unknown = undefined
    if (error instanceof SessionError) expectTypeOf(error.code).toEqualTypeOf<SessionErrorCode>()
    expectTypeOf<SessionForkError>().toMatchTypeOf<SessionError>()
  })
})
