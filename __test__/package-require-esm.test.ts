// A CommonJS host require()s an ES module plugin that imports the package
// (fixtures-require-esm/): the ESM entry has no top-level await, so Node
// >= 20.19 / 22.12 (the `engines` range) load it synchronously. Run under this
// Node and under each Node that scripts/fetch-nodes.sh cached (20.19.0,
// 22.12.0, 24); with DSH_REQUIRE_NODES=1 (.ci/run) a missing one fails.

import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = path.resolve(__dirname, '..')
const HOST = path.join(__dirname, 'fixtures-require-esm', 'host.cjs')
const CACHE = process.env.DSH_NODE_CACHE ?? path.join(os.homedir(), '.cache', 'dsh-session-native', 'node')
const WANTED = ['node20.19', 'node22.12', 'node24']
const arch = process.arch === 'x64' ? 'x64' : process.arch

/** `[label, node binary]`: this Node, then the cached ones of this machine's architecture. */
function nodes(): Array<[string, string | null]> {
  const found: Array<[string, string | null]> = [[`this node (${process.version})`, process.execPath]]
  for (const name of WANTED) {
    const bin = path.join(CACHE, 'node_modules', `${name}-${arch}`, 'bin', 'node')
    found.push([name, fs.existsSync(bin) ? bin : null])
  }
  return found
}

function run(node: string, args: string[]): { status: number | null; out: Record<string, unknown>; stderr: string } {
  const r = spawnSync(node, args, { cwd: ROOT, encoding: 'utf8', timeout: 60_000 })
  const last = r.stdout.trim().split('\n').pop() ?? ''
  let out: Record<string, unknown> = {}
  try {
    out = JSON.parse(last) as Record<string, unknown>
  } catch {
    out = { unparsed: r.stdout, stderr: r.stderr }
  }
  return { status: r.status, out, stderr: r.stderr }
}

describe('require() of an ES module that imports the package', () => {
  for (const [label, bin] of nodes()) {
    it(`works on ${label}`, (ctx) => {
      if (bin === null) {
        if (process.env.DSH_REQUIRE_NODES === '1') throw new Error(`no ${label} in ${CACHE} (scripts/fetch-nodes.sh installs it)`)
        ctx.skip()
        return
      }
      const r = run(bin, [HOST])
      expect(r.out).toEqual({ node: expect.stringMatching(/^v/), sameObjects: true, id: 'required-esm', messages: 1 })
      expect(r.status).toBe(0)
      expect(r.stderr).not.toMatch(/ERR_REQUIRE_ASYNC_MODULE/)
    })
  }

  it('the ESM entry has no top-level await', () => {
    // A static guard beside the run: `await` outside any function in index.mjs.
    const source = fs.readFileSync(path.join(ROOT, 'index.mjs'), 'utf8').replace(/\/\/.*$/gm, '')
    expect(source).not.toMatch(/^(?:\s*|.*[=(,]\s*)await\b/m)
  })

  it('engines names the Node versions that require() ES modules', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }
    expect(pkg.engines.node).toBe('^20.19.0 || >=22.12.0')
    for (const dir of fs.readdirSync(path.join(ROOT, 'npm'))) {
      const p = JSON.parse(fs.readFileSync(path.join(ROOT, 'npm', dir, 'package.json'), 'utf8')) as { engines: { node: string } }
      expect(p.engines.node, dir).toBe(pkg.engines.node)
    }
  })
})
