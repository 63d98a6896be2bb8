// SPEC 12.1: the service's exports and peers. Each check runs in a fresh
// Node process, as a consumer's would (module instances and caches matter).

import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

const root = path.resolve(__dirname, '..')

function node(args: string[], code: string): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [...args, '-e', code], { cwd: root, encoding: 'utf8' })
  return { status: run.status, stdout: run.stdout.trim(), stderr: run.stderr }
}

function json(args: string[], code: string): unknown {
  const run = node(args, code)
  expect(run.stderr).toBe('')
  expect(run.status).toBe(0)
  return JSON.parse(run.stdout)
}

describe('entries', () => {
  it('the ESM entry has every named export of the CommonJS entry, the same objects, and SessionStore as default', () => {
    const result = json(
      ['--input-type=module'],
      `
      import { createRequire } from 'node:module'
      import * as esm from 'dsh-session-native'
      const cjs = createRequire(process.cwd() + '/')('dsh-session-native')
      const names = Object.keys(cjs)
      console.log(JSON.stringify({
        missing: names.filter((n) => !(n in esm)),
        different: names.filter((n) => esm[n] !== cjs[n]),
        extra: Object.keys(esm).filter((n) => n !== 'default' && !(n in cjs)),
        defaultIsClass: esm.default === cjs.SessionStore && typeof esm.default === 'function',
        named: typeof cjs.SessionStore === 'function' && typeof cjs.SessionForkError === 'function',
      }))
      `,
    )
    expect(result).toEqual({ missing: [], different: [], extra: [], defaultIsClass: true, named: true })
  })

  it('one registry for both entries: a session held through one is held for the other', () => {
    const result = json(
      ['--input-type=module'],
      `
      import { Context } from '@deepseek-ai/cordis'
      import { createRequire } from 'node:module'
      import SessionStore from 'dsh-session-native'
      const cjs = createRequire(process.cwd() + '/')('dsh-session-native')
      const a = new Context(); await a.plugin(SessionStore)
      const b = new Context(); await b.plugin(cjs.SessionStore)
      const session = new cjs.Session('shared')
      a.sessions.enter(session)
      let message
      try { b.sessions.enter(session) } catch (e) { message = e.message }
      console.log(JSON.stringify({ message }))
      `,
    )
    expect(result).toEqual({ message: 'session "shared" is already attached to a store' })
  })
})

describe('peers', () => {
  it('loads no peer until the service is used, then the cordis that dsh-scope declares', () => {
    const result = json(
      [],
      `
      const peers = () => Object.keys(require.cache).filter((k) => /(cordis|dsh-scope).*[.]js$/.test(k)).map((k) => require('node:path').relative(process.cwd(), k))
      const { Session, SessionStore } = require('dsh-session-native')
      new Session('s').append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })
      const before = peers()
      import('@deepseek-ai/cordis').then(async ({ Context, Service }) => {
        const ctx = new Context()
        await ctx.plugin(SessionStore)
        console.log(JSON.stringify({ before, after: peers().sort(), isService: ctx.sessions instanceof Service }))
      })
      `,
    )
    expect(result).toEqual({
      before: [],
      after: [
        'node_modules/@deepseek-ai/cordis/lib/index.js',
        'node_modules/@deepseek-ai/dsh-scope/lib/index.js',
      ],
      isService: true,
    })
  })

  it('without require() of ES modules, the ESM entry says what is needed too (PEER_LOAD; engines names the range)', () => {
    const result = json(
      ['--no-experimental-require-module', '--input-type=module'],
      `
      import { Context } from '@deepseek-ai/cordis'
      import SessionStore from 'dsh-session-native'
      const ctx = new Context()
      try { new SessionStore(ctx) } catch (e) { console.log(JSON.stringify({ requireModule: process.features.require_module, code: e.code, message: e.message })) }
      `,
    )
    expect(result).toMatchObject({ requireModule: false, code: 'PEER_LOAD', message: expect.stringContaining('needs Node >= 20.19 or >= 22.12') })
  })

  it('without require() of ES modules, constructing from CommonJS alone says what is needed (PEER_LOAD)', () => {
    const result = json(
      ['--no-experimental-require-module'],
      `
      const { SessionStore } = require('dsh-session-native')
      try { new SessionStore({}) } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }
      `,
    )
    expect(result).toMatchObject({
      code: 'PEER_LOAD',
      message: expect.stringContaining('needs Node >= 20.19 or >= 22.12'),
    })
  })
})
