// PUB 13: upstream's own session-core test files (test-published/upstream/session,
// vendored unedited from packages/core/session/tests at 48fb3b528b) type-check
// the same against our hand-written declarations (published/lib/*.d.ts) as
// against the reference @deepseek-ai/dsh-session@0.1.1-rc.2's (lib/types/*.d.ts).
// Users install ours under upstream's name, so their TypeScript must see no new
// error: tsc runs twice over one run folder, the package and its subpaths mapped
// to one side's declarations each time, and every diagnostic ours gives that the
// reference does not (same file, position and code) fails the test.
//
// Compiler options: upstream's tsconfig.base.json (strict, noUncheckedIndexedAccess,
// exactOptionalPropertyTypes, noUnused*, bundler resolution, .ts imports), as
// tsconfig.host.json checks packages/*/*/tests (noEmit). The peers resolve from
// test-published/node_modules, vitest and fast-check from the root's.
//
// The agent-loop suite (test-published/upstream/agent-loop) needs dsh-agent-loop,
// dsh-agent, dsh-tools, dsh-system-prompt, dsh-settings, dsh-code-runtime and
// dsh-session-persistence-jsonl, which test-published does not install; it is
// compiled too when DSH_UPSTREAM_RUN_DIR names a run folder of
// scripts/upstream-suites.mjs (--keep or --dir), whose node_modules holds them and
// whose packages/core/agent-loop/src holds the shims; its peers then resolve
// from there (the session suite's stay on test-published's).
// gen-persistence-catalog.spec.ts is left out as upstream-suites.mjs leaves it
// out (it tests a repository script, ../../../../scripts/, not the package), and
// request-cache.e2e.ts too (an e2e test upstream runs only under its e2e config).
import { spawn } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const installed = join(root, 'test-published', 'node_modules', '@deepseek-ai')
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
const LEFT_OUT = new Set(['gen-persistence-catalog.spec.ts', 'request-cache.e2e.ts'])

const present = existsSync(join(installed, 'dsh-session', 'lib', 'types', 'index.d.ts'))
const upstreamRun = process.env.DSH_UPSTREAM_RUN_DIR === undefined ? undefined : resolve(process.env.DSH_UPSTREAM_RUN_DIR)

type Side = 'reference' | 'ours'
function sessionPaths(side: Side): Record<string, string[]> {
  return side === 'reference'
    ? {
        '@deepseek-ai/dsh-session': [join(installed, 'dsh-session/lib/types/index.d.ts')],
        '@deepseek-ai/dsh-session/*': [join(installed, 'dsh-session/lib/types/*.d.ts')],
      }
    : {
        '@deepseek-ai/dsh-session': [join(root, 'published/lib/index.d.ts')],
        '@deepseek-ai/dsh-session/*': [join(root, 'published/lib/*.d.ts')],
      }
}

type Suite = {
  name: 'session' | 'agent-loop'
  /** the vendored test files */
  tests: string
  /** the folder whose @deepseek-ai/* (all but dsh-session) the peers resolve to */
  peers: string
  /** what the tests import from '../src/': file name to content, or to a file to copy */
  src: Record<string, { text: string } | { copy: string }>
  /** a node_modules to link into the run folder (bare imports other than @deepseek-ai/*) */
  nodeModules?: string
}
const SUITES: Suite[] = [
  {
    name: 'session',
    tests: join(root, 'test-published/upstream/session'),
    peers: installed,
    // upstream-suites.mjs's SHIMS; only repair.spec.ts imports '../src/index.ts'
    src: { 'index.ts': { text: "export * from '@deepseek-ai/dsh-session'\nexport { default } from '@deepseek-ai/dsh-session'\n" } },
  },
]
if (upstreamRun !== undefined) {
  const src = join(upstreamRun, 'packages/core/agent-loop/src')
  SUITES.push({
    name: 'agent-loop',
    tests: join(root, 'test-published/upstream/agent-loop'),
    peers: join(upstreamRun, 'node_modules/@deepseek-ai'),
    src: Object.fromEntries(existsSync(src) ? readdirSync(src).map(f => [f, { copy: join(src, f) }]) : []),
    nodeModules: join(upstreamRun, 'node_modules'),
  })
}

// upstream's tsconfig.base.json + tsconfig.host.json at 48fb3b528b (minus the
// build-only options: declarations, source maps, composite, incremental).
function compilerOptions(suite: Suite, side: Side) {
  const paths: Record<string, string[]> = {}
  for (const peer of readdirSync(suite.peers)) {
    const types = join(suite.peers, peer, 'lib/types/index.d.ts')
    if (peer !== 'dsh-session' && existsSync(types)) paths[`@deepseek-ai/${peer}`] = [types]
  }
  Object.assign(paths, sessionPaths(side))
  return {
    target: 'es2024',
    module: 'esnext',
    moduleResolution: 'bundler',
    noEmit: true,
    skipLibCheck: true,
    esModuleInterop: true,
    allowImportingTsExtensions: true,
    verbatimModuleSyntax: false,
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    noImplicitOverride: true,
    noFallthroughCasesInSwitch: true,
    noUnusedLocals: true,
    noUnusedParameters: true,
    types: ['node'],
    // the run folder's @types first (upstream-suites.mjs installs no @types/node), then the root's
    typeRoots: [...(suite.nodeModules === undefined ? [] : [join(suite.nodeModules, '@types')]), join(root, 'node_modules/@types')],
    paths,
  }
}

const runs: string[] = []
function layout(suite: Suite): string {
  // Inside the checkout (tmp/ is ignored) so that vitest and fast-check resolve
  // from the root's node_modules; upstream's layout so relative imports work.
  mkdirSync(join(root, 'tmp'), { recursive: true })
  const dir = mkdtempSync(join(root, 'tmp', `published-types-upstream-${suite.name}-`))
  runs.push(dir)
  const tests = join(dir, `packages/core/${suite.name}/tests`)
  const src = join(dir, `packages/core/${suite.name}/src`)
  mkdirSync(tests, { recursive: true })
  mkdirSync(src, { recursive: true })
  for (const f of readdirSync(suite.tests)) if (f.endsWith('.ts') && !LEFT_OUT.has(f)) copyFileSync(join(suite.tests, f), join(tests, f))
  for (const [f, what] of Object.entries(suite.src)) {
    if ('text' in what) writeFileSync(join(src, f), what.text)
    else copyFileSync(what.copy, join(src, f))
  }
  if (suite.nodeModules !== undefined) symlinkSync(suite.nodeModules, join(dir, 'node_modules'), 'junction')
  for (const side of ['reference', 'ours'] as const) {
    writeFileSync(join(dir, `tsconfig.${side}.json`), JSON.stringify({
      compilerOptions: compilerOptions(suite, side),
      include: [`packages/core/${suite.name}/tests/*.ts`],
    }, null, 2))
  }
  return dir
}

type Diagnostic = { key: string; text: string }
type Result = { status: number | null; diagnostics: Diagnostic[]; files: string[]; out: string }
function tscRun(dir: string, side: Side): Promise<Result> {
  return new Promise((done, failed) => {
    const child = spawn(process.execPath, [tsc, '-p', join(dir, `tsconfig.${side}.json`), '--pretty', 'false', '--listFiles'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', d => (out += d))
    child.stderr.on('data', d => (out += d))
    child.on('error', failed)
    child.on('close', status => done({ status, out, ...parse(dir, out) }))
  })
}
// One diagnostic: its first line `file(line,col): error TSnnnn: message` and the
// indented elaboration lines after it. Keyed by place and code; the message
// names declaration files, which differ between the two sides. --listFiles
// lines are absolute paths.
function parse(dir: string, out: string): { diagnostics: Diagnostic[]; files: string[] } {
  const diagnostics: Diagnostic[] = []
  const files: string[] = []
  for (const line of out.split(/\r?\n/)) {
    const m = /^(.+?)\((\d+),(\d+)\): error (TS\d+): /.exec(line)
    const global = /^error (TS\d+): /.exec(line)
    if (m) {
      const file = relative(dir, resolve(dir, m[1]!)).replaceAll('\\', '/')
      diagnostics.push({ key: `${file}:${m[2]}:${m[3]} ${m[4]}`, text: line.replace(m[1]!, file) })
    } else if (global) diagnostics.push({ key: `(global) ${line}`, text: line })
    else if (/^(\/|[A-Za-z]:[\\/])/.test(line)) files.push(resolve(line))
    else if (line.trim() !== '' && diagnostics.length > 0) diagnostics[diagnostics.length - 1]!.text += '\n' + line
  }
  return { diagnostics, files }
}

describe.skipIf(!present)('PUB 13 upstream tests type-check against our declarations as against the reference', () => {
  afterAll(() => {
    if (process.env.DSH_KEEP_TYPES_RUN === undefined) for (const dir of runs) rmSync(dir, { recursive: true, force: true })
  })

  for (const suite of SUITES) {
    it(`${suite.name}: ours gives no diagnostic the reference does not`, async () => {
      const dir = layout(suite)
      const [ref, ours] = await Promise.all([tscRun(dir, 'reference'), tscRun(dir, 'ours')])
      // tsc ran and compiled (exit 0 clean, 2 with diagnostics); a crash is not a result
      expect([0, 2], ref.out).toContain(ref.status)
      expect([0, 2], ours.out).toContain(ours.status)
      // each program holds the test files and its side's declarations
      const specs = readdirSync(suite.tests).filter(f => f.endsWith('.spec.ts') && !LEFT_OUT.has(f)).length
      for (const [result, declarations] of [[ref, join(installed, 'dsh-session/lib/types/index.d.ts')], [ours, join(root, 'published/lib/index.d.ts')]] as const) {
        expect(result.files).toContain(resolve(declarations))
        expect(result.files.filter(f => f.endsWith('.spec.ts')).length).toBe(specs)
      }
      const refKeys = new Set(ref.diagnostics.map(d => d.key))
      const extra = ours.diagnostics.filter(d => !refKeys.has(d.key)).map(d => d.text)
      if (ref.diagnostics.length > 0) console.log(`${suite.name}: the reference gives ${ref.diagnostics.length} diagnostics (ours ${ours.diagnostics.length}):\n${ref.diagnostics.map(d => d.text).join('\n')}`)
      expect(extra, `${suite.name}: diagnostics of ours the reference does not give (reference: ${ref.diagnostics.length}, ours: ${ours.diagnostics.length})`).toEqual([])
    }, 180_000)
  }
})
