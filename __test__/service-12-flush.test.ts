// SPEC 12.5: `ctx.sessions.flush(session)`: every session/flush listener of
// the owner scope, awaited together, rejecting with the first failure's raw
// reason (never an AggregateError), and `not live` for anything not entered.

import { describe, expect, it } from 'vitest'
import { Session } from '../index.js'
import { mount, scope, ticks } from './service-helpers.js'

describe('flush', () => {
  it('reaches the owner scope when called through the root and awaits every listener', async () => {
    const { ctx } = await mount()
    const A = {}
    const a = await scope(ctx, A)
    const log: string[] = []
    a.ctx.on('session/flush', async (s) => {
      await new Promise((resolve) => setTimeout(resolve, 20))
      log.push(`A flushed ${s.id}`)
    })
    const session = a.ctx.sessions.create('owned')
    const result = await ctx.sessions.flush(session)
    expect(result).toBeUndefined()
    expect(log).toEqual(['A flushed owned'])
  })

  it('rejects with the raw error of a rejection without starving later listeners', async () => {
    const { ctx, warnings } = await mount()
    const error = new Error('disk full')
    const started: string[] = []
    ctx.on('session/flush', async () => {
      started.push('first')
      throw error
    })
    ctx.on('session/flush', () => void started.push('second'))
    const session = ctx.sessions.create('f')
    await expect(ctx.sessions.flush(session)).rejects.toBe(error)
    expect(started).toEqual(['first', 'second'])
    await ticks()
    expect(warnings).toEqual([])
  })

  it('a synchronous throw becomes a rejection with exactly the thrown value', async () => {
    const { ctx } = await mount()
    const error = new Error('disk full')
    const started: string[] = []
    ctx.on('session/flush', () => {
      started.push('first')
      throw error
    })
    ctx.on('session/flush', () => void started.push('second'))
    const session = ctx.sessions.create('f')
    const pending = ctx.sessions.flush(session)
    // Every listener was called synchronously.
    expect(started).toEqual(['first', 'second'])
    await expect(pending).rejects.toBe(error)
  })

  it('rejects with the first failing listener in registration order, not the first to fail in time', async () => {
    const { ctx } = await mount()
    const slow = new Error('slow failure')
    const fast = new Error('fast failure')
    ctx.on('session/flush', async () => {
      await new Promise((resolve) => setTimeout(resolve, 20))
      throw slow
    })
    ctx.on('session/flush', async () => {
      throw fast
    })
    const session = ctx.sessions.create('o')
    const reason = await ctx.sessions.flush(session).catch((e: unknown) => e)
    expect(reason).toBe(slow)
    expect(reason).not.toBeInstanceOf(AggregateError)
  })

  it('settles only after a slower listener', async () => {
    const { ctx } = await mount()
    let done = false
    ctx.on('session/flush', () => {
      throw new Error('fails at once')
    })
    ctx.on('session/flush', async () => {
      await new Promise((resolve) => setTimeout(resolve, 30))
      done = true
    })
    const session = ctx.sessions.create('slow')
    await expect(ctx.sessions.flush(session)).rejects.toThrow('fails at once')
    expect(done).toBe(true)
  })

  it('rejects `not live` for prepared, detached and foreign sessions, with no listener run', async () => {
    const { ctx } = await mount()
    let calls = 0
    ctx.on('session/flush', () => void calls++)
    const prepared = ctx.sessions.prepare('p')
    await expect(ctx.sessions.flush(prepared)).rejects.toThrow('session "p" is not live in this store')
    const detach = ctx.sessions.enter(prepared)
    detach()
    await expect(ctx.sessions.flush(prepared)).rejects.toThrow('session "p" is not live in this store')
    ctx.sessions.create('q')
    await expect(ctx.sessions.flush(new Session('q'))).rejects.toThrow('session "q" is not live in this store')
    expect(calls).toBe(0)
  })

  it('an internal/dispatch throw is a rejection, not a synchronous throw', async () => {
    const { ctx } = await mount()
    ctx.on('internal/dispatch', (_mode, name) => {
      if (name === 'session/flush') throw new Error('no flush')
    })
    const session = ctx.sessions.create('d')
    let pending: Promise<void> | undefined
    expect(() => {
      pending = ctx.sessions.flush(session)
    }).not.toThrow()
    await expect(pending).rejects.toThrow('no flush')
  })

  it('resolves with no listener', async () => {
    const { ctx } = await mount()
    await expect(ctx.sessions.flush(ctx.sessions.create('none'))).resolves.toBeUndefined()
  })
})
