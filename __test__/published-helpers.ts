// Shared helpers for the published line's differential tests (not a test file
// itself): ours and the reference 0.1.1-rc.2, each call's outcome compared.
import { expect } from 'vitest'
// @ts-ignore -- plain JS
import * as ours from '../published/lib/index.js'
// @ts-ignore -- the reference tree
import * as ref from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/index.js'

export { ours, ref }

export type Any = any
export type Outcome = { ok: true; value: Any } | { ok: false; error: Any }

export function outcome(fn: () => unknown): Outcome {
  try {
    return { ok: true, value: fn() }
  } catch (error) {
    return { ok: false, error }
  }
}
export async function outcomeAsync(fn: () => Promise<unknown>): Promise<Outcome> {
  try {
    return { ok: true, value: await fn() }
  } catch (error) {
    return { ok: false, error }
  }
}
/** The same accept/reject and message, TypeError alike; ours carries the reference's code, or else its own stable one. */
export function sameOutcome(o: Outcome, r: Outcome, what = '') {
  if (!r.ok) {
    expect(o.ok, `${what}: reference rejected with ${r.error?.message}`).toBe(false)
    if (o.ok) return
    expect(o.error.message, what).toBe(r.error.message)
    expect(o.error instanceof TypeError, what).toBe(r.error instanceof TypeError)
    if (r.error.code !== undefined) expect(o.error.code, what).toBe(r.error.code)
    else if (!(r.error instanceof TypeError)) expect(o.error.code, what).toMatch(/^[A-Z_]+$/)
  } else {
    expect(o.ok, `${what}: ours rejected with ${(o as Any).error?.message}`).toBe(true)
  }
}
export const noTime = (events: readonly Any[]) => events.map(({ time, ...rest }) => rest)
