// Shared setup of the SessionStore service tests (SPEC 12.7): a fresh root
// cordis Context with the store plugged in, warnings captured by replacing
// `ctx.logger.warn`, and scopes minted with dsh-scope's `createScope`.

import { Context } from '@deepseek-ai/cordis'
import { createScope, type ScopeKey } from '@deepseek-ai/dsh-scope'
import { SessionStore, type Session, type SessionEvent } from '../index.js'

export interface Mounted {
  ctx: Context
  warnings: string[]
}

/** A fresh root context with `ctx.plugin(SessionStore)` awaited and warnings captured. */
export async function mount(): Promise<Mounted> {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  const warnings: string[] = []
  ctx.logger.warn = ((text: string) => {
    warnings.push(text)
  }) as typeof ctx.logger.warn
  return { ctx, warnings }
}

export interface Scope {
  ctx: Context
  dispose: () => Promise<void>
}

/** A scope keyed `key`, minted inside a plugin that injects `sessions` (as an agent is). */
export async function scope(ctx: Context, key: ScopeKey): Promise<Scope> {
  let minted: Scope | undefined
  await ctx.plugin({
    inject: ['sessions'],
    apply(inner: Context) {
      const { ctx: scoped, dispose } = createScope(inner, key)
      minted = { ctx: scoped, dispose }
    },
  })
  if (minted === undefined) throw new Error('scope was not minted')
  return minted
}

/** A child fiber of `ctx` that injects `sessions`, with its own dispose. */
export async function fiber(ctx: Context): Promise<{ ctx: Context; dispose: () => Promise<void> }> {
  let inner: Context | undefined
  const handle = ctx.plugin({
    inject: ['sessions'],
    apply(c: Context) {
      inner = c
    },
  })
  await handle
  if (inner === undefined) throw new Error('fiber did not start')
  return { ctx: inner, dispose: async () => void (await handle.dispose()) }
}

/** Two microtask turns (rejection handlers run by then). */
export async function ticks(): Promise<void> {
  await Promise.resolve()
  await Promise.resolve()
}

export const trigger = { kind: 'message' as const, source: { kind: 'user' } }
export const turnStart = (turn = 1) => ({ turn, trigger })
export const completed = (turn = 1) => ({ turn, reason: { kind: 'completed' as const } })
export const userMessage = (text: string) => ({ content: [{ type: 'text' as const, text }], source: { kind: 'user' } })

/** Append a closed turn (start, user message, end). */
export function closedTurn(session: Session, turn = 1): SessionEvent[] {
  return [
    session.append('turn/start', turnStart(turn)),
    session.append('user/message', userMessage(`hi ${turn}`), { surfaceOp: 'append' }),
    session.append('turn/end', completed(turn)),
  ]
}
