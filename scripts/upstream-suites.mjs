#!/usr/bin/env node
// Upstream's own test suites (packages/core/session/tests and
// packages/core/agent-loop/tests at 48fb3b528b, vendored unedited in
// test-published/upstream/) run against a package that claims to be
// @deepseek-ai/dsh-session@0.1.1-rc.2 (docs/PUBLISHED-PLAN.md decision 6).
//
//   node scripts/upstream-suites.mjs [--package <tarball-or-dir>] [--suite session|agent-loop]
//                                    [--keep] [--dir <folder>]
//
//   --package  the package under test: a .tgz (npm pack) or a package folder
//              (packed here with `npm pack --ignore-scripts`, so it installs as a
//              copy, not a symlink that would resolve its peers elsewhere).
//              Default: upstream's own @deepseek-ai/dsh-session@0.1.1-rc.2.
//              Tarballs beside it that its optionalDependencies name (npm run
//              package's dist/: the platform package holding the addon) are
//              installed from there too.
//   --suite    one suite only (default: both).
//   --keep     leave the run folder in place (its path is printed).
//   --dir      run in this folder instead of a new temporary one (reused:
//              node_modules stays, so only a changed package reinstalls).
//   --node     the Node binary that runs vitest. Default: this one if it is
//              >= 22.19 (upstream's engines), else node24-x64 from
//              scripts/fetch-nodes.sh's cache ($DSH_NODE_CACHE) if there, else
//              this one, with Promise.withResolvers polyfilled (Node 20) and the
//              tests that need zlib zstd left out.
//
// The run folder mirrors upstream's layout (packages/core/<suite>/tests,
// scripts/test-invariants.ts), so the tests' relative imports and the setup
// file's import.meta.glob work unedited; what they import from `../src/` is a
// generated shim (see SHIMS below). Results are compared with
// test-published/upstream/expected-failures.json: an unexpected failure, or an
// expected failure that passes, exits 1.
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import {
  copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const vendored = join(root, 'test-published', 'upstream')
const started = Date.now()
const secs = since => ((Date.now() - since) / 1000).toFixed(1)

// ---- arguments
const args = process.argv.slice(2)
const opt = { package: undefined, suites: ['session', 'agent-loop'], keep: false, dir: undefined, node: undefined }
for (let i = 0; i < args.length; i++) {
  const a = args[i]
  if (a === '--package') opt.package = args[++i]
  else if (a === '--suite') {
    const s = args[++i]
    if (s !== 'session' && s !== 'agent-loop') fail(`--suite must be session or agent-loop, got ${s}`)
    opt.suites = [s]
  } else if (a === '--keep') opt.keep = true
  else if (a === '--dir') opt.dir = resolve(args[++i])
  else if (a === '--node') opt.node = resolve(args[++i])
  else if (a === '-h' || a === '--help') {
    console.log(readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(1, 21).join('\n'))
    process.exit(0)
  } else fail(`unknown argument ${a}`)
}
function fail(message) {
  console.error(`upstream-suites: ${message}`)
  process.exit(2)
}

// ---- the dependencies: the rc.8 release (48fb3b528b's workspace versions are
// 0.1.0-rc.8; npm's 0.1.1-rc.2 dsh-llm is later code than that commit).
// dsh-session is the package under test. Exact versions: no floating.
const RC8 = '0.1.0-rc.8'
const REFERENCE = '0.1.1-rc.2'
const dependencies = {
  '@deepseek-ai/cordis': '4.0.1',
  '@deepseek-ai/dsh-agent': RC8,
  '@deepseek-ai/dsh-agent-loop': RC8,
  '@deepseek-ai/dsh-attachment': RC8, // scripts/test-invariants.ts
  '@deepseek-ai/dsh-brand': RC8,
  '@deepseek-ai/dsh-code-runtime': RC8,
  '@deepseek-ai/dsh-invariants': RC8,
  '@deepseek-ai/dsh-llm': RC8,
  '@deepseek-ai/dsh-scope': RC8,
  '@deepseek-ai/dsh-session-persistence': RC8,
  '@deepseek-ai/dsh-session-persistence-jsonl': RC8,
  '@deepseek-ai/dsh-settings': RC8,
  '@deepseek-ai/dsh-system-prompt': RC8,
  '@deepseek-ai/dsh-timeout': RC8,
  '@deepseek-ai/dsh-tools': RC8,
  '@deepseek-ai/dsh-typert-protocol': RC8,
  '@deepseek-ai/dsh-typert-registry': RC8,
  // upstream's pnpm-lock.yaml at 48fb3b528b
  'fast-check': '4.8.0',
  vitest: '4.1.8',
}

// ---- the Node that runs the tests
const atLeast = (version, [maj, min]) => {
  const [a, b] = version.split('.').map(Number)
  return a > maj || (a === maj && b >= min)
}
let testNode = opt.node ?? process.execPath
if (opt.node === undefined && !atLeast(process.versions.node, [22, 19])) {
  const cache = process.env.DSH_NODE_CACHE ?? join(process.env.HOME ?? '', '.cache/dsh-session-native/node')
  const candidate = join(cache, 'node_modules/node24-x64/bin/node')
  if (process.platform === 'linux' && process.arch === 'x64' && existsSync(candidate)) testNode = candidate
}
const probe = spawnSync(testNode, ['-p', "JSON.stringify({v: process.versions.node, zstd: typeof require('node:zlib').zstdCompressSync === 'function', withResolvers: typeof Promise.withResolvers === 'function'})"], { encoding: 'utf8' })
if (probe.status !== 0) fail(`${testNode} does not run: ${probe.stderr}`)
const testNodeInfo = JSON.parse(probe.stdout)

// ---- files left out, with the reason (printed on every run)
const hasZstd = testNodeInfo.zstd
const leftOut = [
  {
    suite: 'session', file: 'gen-persistence-catalog.spec.ts',
    reason: "tests upstream's repository tool scripts/gen-persistence-catalog.ts (TypeScript AST scan of the monorepo), not the package",
  },
  {
    suite: 'agent-loop', file: 'request-cache.e2e.ts',
    reason: 'an e2e test against the live DeepSeek API (@deepseek-ai/dsh-llm-deepseek, a key, the network); upstream runs it only under vitest.e2e.config.ts',
  },
  ...(hasZstd ? [] : ['config-session-id.spec.ts', 'resume.spec.ts'].map(file => ({
    suite: 'agent-loop', file,
    reason: `needs zlib zstd (JsonlSessionPersistence writes .jsonl.zstd); Node ${testNodeInfo.v} lacks it (added in 22.15)`,
  }))),
]

// ---- what the tests import from ../src/ (upstream's sources), mapped to packages.
// session: only repair.spec.ts imports '../src/index.ts', for root exports.
// agent-loop: contract-regressions.spec.ts imports ReactLoopAgent from
// '../src/agent.ts' and runtime-context.spec.ts RuntimeContextProjection from
// '../src/runtime-context.ts': agent-loop internals (not the package under test)
// that its published bundle defines but does not export. They come from a copy
// of that bundle (lib/index.js of dsh-agent-loop 0.1.0-rc.8) with one export
// line added; the copy imports the same installed dsh-session.
// scripts/test-invariants.ts globs '../packages/*/*/src/invariant.ts' and mounts
// the test package's companion on every Cordis root: those are the packages'
// ./invariant subpaths.
const SHIMS = {
  'packages/core/session/src/index.ts': "export * from '@deepseek-ai/dsh-session'\nexport { default } from '@deepseek-ai/dsh-session'\n",
  'packages/core/session/src/invariant.ts': "export * from '@deepseek-ai/dsh-session/invariant'\n",
  'packages/core/session/src/surface.ts': "export * from '@deepseek-ai/dsh-session/surface'\n",
  'packages/core/session/src/types.ts': "export * from '@deepseek-ai/dsh-session/types'\n",
  'packages/core/agent-loop/src/index.ts': "export * from '@deepseek-ai/dsh-agent-loop'\nexport { default } from '@deepseek-ai/dsh-agent-loop'\n",
  'packages/core/agent-loop/src/invariant.ts': "export * from '@deepseek-ai/dsh-agent-loop/invariant'\n",
  'packages/core/agent-loop/src/agent.ts': "export { ReactLoopAgent } from './published-bundle-internals.js'\n",
  'packages/core/agent-loop/src/runtime-context.ts': "export { RuntimeContextProjection } from './published-bundle-internals.js'\n",
}
const AGENT_LOOP_INTERNALS = ['ReactLoopAgent', 'RuntimeContextProjection']

// ---- the package under test
if (opt.dir !== undefined) mkdirSync(opt.dir, { recursive: true })
const work = realpathSync(opt.dir ?? mkdtempSync(join(tmpdir(), 'dsh-upstream-suites-')))
let sessionSpec = REFERENCE
let underTest
const companions = {}
let label = `@deepseek-ai/dsh-session@${REFERENCE} (upstream's own, from npm)`
if (opt.package !== undefined) {
  const given = resolve(opt.package)
  if (!existsSync(given)) fail(`--package ${given} does not exist`)
  let tarball = given
  if (statSync(given).isDirectory()) {
    const packed = spawnSync('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', work, given], { encoding: 'utf8' })
    if (packed.status !== 0) fail(`npm pack ${given} failed:\n${packed.stderr}`)
    tarball = join(work, packed.stdout.trim().split('\n').pop())
  }
  // A copy under the run folder, under a name of its content, so npm sees a change.
  const bytes = readFileSync(tarball)
  const copy = join(work, `under-test-${bytes.length}-${hash(bytes)}.tgz`)
  if (!existsSync(copy)) copyFileSync(tarball, copy)
  sessionSpec = `file:./${basename(copy)}`
  underTest = copy
  // Its optionalDependencies found as tarballs beside it (npm run package's
  // dist/: the platform package with the addon) install from there too.
  const optional = Object.keys(tarballManifest(tarball).optionalDependencies ?? {})
  for (const f of readdirSync(dirname(tarball)).filter(f => f.endsWith('.tgz')).sort()) {
    const t = join(dirname(tarball), f)
    if (t === tarball) continue
    const name = tarballManifest(t)?.name
    if (optional.includes(name)) {
      const c = join(work, basename(t))
      copyFileSync(t, c)
      companions[name] = `file:./${basename(c)}`
    }
  }
  label = `${given}${tarball === given ? '' : ` (packed: ${basename(tarball)})`}`
}
function tarballManifest(tgz) {
  const r = spawnSync('tar', ['-xzOf', tgz, 'package/package.json'], { encoding: 'utf8' })
  return r.status === 0 ? JSON.parse(r.stdout) : undefined
}
function hash(bytes) {
  let h = 0x811c9dc5
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193) >>> 0
  return h.toString(16)
}
console.log(`== upstream suites (48fb3b528b) against ${label}`)
console.log(`   run folder: ${work}`)
for (const [n, spec] of Object.entries(companions)) console.log(`   with ${n} (${spec.slice('file:./'.length)}, beside the tarball)`)

// ---- install
const pkg = {
  name: 'dsh-upstream-suites-run',
  private: true,
  type: 'module',
  dependencies: { ...dependencies, '@deepseek-ai/dsh-session': sessionSpec, ...companions },
  // The agent loop's (and every other package's) own dependency on
  // dsh-session resolves to the package under test too.
  overrides: Object.fromEntries(['@deepseek-ai/dsh-session', ...Object.keys(companions)].map(n => [n, `$${n}`])),
}
writeFileSync(join(work, 'package.json'), JSON.stringify(pkg, null, 2) + '\n')
writeFileSync(join(work, '.npmrc'), 'legacy-peer-deps=true\nfund=false\naudit=false\n')
let t = Date.now()
const install = spawnSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', '--no-package-lock'],
  { cwd: work, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
if (install.status !== 0) fail(`npm install failed:\n${install.stdout}\n${install.stderr}`)
console.log(`   npm install: ${secs(t)} s`)

// ---- one dsh-session everywhere: npm ls and npm query (one physical copy),
// resolution from every installed package, and (with --package) its files
// byte for byte those of the tarball.
const ls = spawnSync('npm', ['ls', '@deepseek-ai/dsh-session', '--all', '--json'], { cwd: work, encoding: 'utf8' })
const found = []
;(function walk(node, path) {
  for (const [name, dep] of Object.entries(node.dependencies ?? {})) {
    if (name === '@deepseek-ai/dsh-session') found.push({ path: [...path, name].join(' > '), version: dep.version })
    walk(dep, [...path, name])
  }
})(JSON.parse(ls.stdout || '{}'), [])
const query = spawnSync('npm', ['query', '#@deepseek-ai/dsh-session'], { cwd: work, encoding: 'utf8' })
const copies = JSON.parse(query.stdout || '[]').map(n => n.location)
const sessionDir = realpathSync(join(work, 'node_modules/@deepseek-ai/dsh-session'))
const installedVersion = JSON.parse(readFileSync(join(sessionDir, 'package.json'), 'utf8')).version
const problems = []
if (found.length === 0) problems.push(`npm ls found none:\n${ls.stdout}${ls.stderr}`)
for (const f of found) if (f.version !== installedVersion) problems.push(`npm ls: ${f.path} is ${f.version}`)
if (copies.length !== 1 || copies[0] !== 'node_modules/@deepseek-ai/dsh-session') problems.push(`npm query: copies at ${JSON.stringify(copies)}`)
for (const n of readdirSync(join(work, 'node_modules/@deepseek-ai'))) {
  const from = join(work, 'node_modules/@deepseek-ai', n, 'package.json')
  let got
  try {
    got = realpathSync(createRequire(from).resolve('@deepseek-ai/dsh-session/package.json'))
  } catch {
    continue
  }
  if (dirname(got) !== sessionDir) problems.push(`@deepseek-ai/${n} resolves it to ${got}`)
}
if (underTest !== undefined) {
  const unpacked = mkdtempSync(join(tmpdir(), 'dsh-upstream-tgz-'))
  const tar = spawnSync('tar', ['-xzf', underTest, '-C', unpacked], { encoding: 'utf8' })
  if (tar.status !== 0) problems.push(`tar -xzf ${underTest}: ${tar.stderr}`)
  const files = []
  ;(function walk(dir, rel) {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name), `${rel}${e.name}/`)
      else files.push(`${rel}${e.name}`)
    }
  })(join(unpacked, 'package'), '')
  for (const f of files) {
    const installed = join(sessionDir, f)
    if (!existsSync(installed) || !readFileSync(installed).equals(readFileSync(join(unpacked, 'package', f)))) problems.push(`installed ${f} is not the tarball's`)
  }
  rmSync(unpacked, { recursive: true, force: true })
  if (problems.length === 0) console.log(`   installed @deepseek-ai/dsh-session: the tarball's ${files.length} files, byte for byte`)
}
if (problems.length > 0) {
  console.error('upstream-suites: @deepseek-ai/dsh-session does not resolve to the package under test everywhere:')
  for (const p of problems) console.error(`  ${p}`)
  process.exit(1)
}
console.log(`   npm ls @deepseek-ai/dsh-session: ${found.length} entries, all ${installedVersion}, one copy (${found.map(f => f.path === '@deepseek-ai/dsh-session' ? 'the root' : f.path.replace(/ > @deepseek-ai\/dsh-session$/, '')).join(', ')})`)

// ---- the tests, the shims, the setup file, the config
for (const suite of ['session', 'agent-loop']) rmSync(join(work, 'packages/core', suite), { recursive: true, force: true })
for (const suite of opt.suites) {
  const to = join(work, 'packages/core', suite, 'tests')
  mkdirSync(to, { recursive: true })
  for (const f of readdirSync(join(vendored, suite))) copyFileSync(join(vendored, suite, f), join(to, f))
}
for (const [rel, text] of Object.entries(SHIMS)) {
  mkdirSync(dirname(join(work, rel)), { recursive: true })
  writeFileSync(join(work, rel), `// generated by scripts/upstream-suites.mjs\n${text}`)
}
{
  const bundle = readFileSync(join(work, 'node_modules/@deepseek-ai/dsh-agent-loop/lib/index.js'), 'utf8')
  for (const name of AGENT_LOOP_INTERNALS) {
    if (!new RegExp(`^var ${name} = class\\b`, 'm').test(bundle)) fail(`dsh-agent-loop's bundle no longer defines ${name}`)
  }
  writeFileSync(join(work, 'packages/core/agent-loop/src/published-bundle-internals.js'),
    `${bundle.replace(/\n\/\/# sourceMappingURL=.*$/u, '\n')}\n// added by scripts/upstream-suites.mjs: the internals two tests import from ../src/\nexport { ${AGENT_LOOP_INTERNALS.join(', ')} };\n`)
  // The copy imports its dependencies by name; resolve them from the run folder.
}
mkdirSync(join(work, 'scripts'), { recursive: true })
copyFileSync(join(vendored, 'support/test-invariants.ts'), join(work, 'scripts/test-invariants.ts'))
const excluded = leftOut.filter(l => opt.suites.includes(l.suite))
// The setup file reads FiberState from Cordis: a `const enum` in Cordis's
// source (which upstream's tests run from), erased from the published lib. For
// that one importer, Cordis comes through a module that adds the enum's values
// (vendor/cordis/src/fiber.ts at 48fb3b528b).
writeFileSync(join(work, 'scripts/cordis-with-fiber-state.mjs'), `// generated by scripts/upstream-suites.mjs
export * from '@deepseek-ai/cordis'
export const FiberState = Object.freeze({ PENDING: 0, LOADING: 1, ACTIVE: 2, FAILED: 3, DISPOSED: 4, UNLOADING: 5 })
`)
writeFileSync(join(work, 'vitest.config.mjs'), `// generated by scripts/upstream-suites.mjs
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'
const setupFile = fileURLToPath(new URL('./scripts/test-invariants.ts', import.meta.url))
const cordisShim = fileURLToPath(new URL('./scripts/cordis-with-fiber-state.mjs', import.meta.url))
export default defineConfig({
  plugins: [{
    name: 'cordis-fiber-state-for-the-setup-file',
    enforce: 'pre',
    resolveId(source, importer) {
      if (source === '@deepseek-ai/cordis' && importer?.split('?')[0] === setupFile) return cordisShim
    },
  }],
  test: {
    // as upstream's vitest.config.ts: its setup file, forked workers
    setupFiles: ${JSON.stringify([...(testNodeInfo.withResolvers ? [] : ['./scripts/node20-promise-with-resolvers.mjs']), './scripts/test-invariants.ts'])},
    pool: 'forks',
    include: ${JSON.stringify(opt.suites.map(s => `packages/core/${s}/tests/**/*.spec.ts`))},
    exclude: ${JSON.stringify(['**/node_modules/**', ...excluded.map(l => `packages/core/${l.suite}/tests/${l.file}`)])},
  },
})
`)
if (!testNodeInfo.withResolvers) {
  writeFileSync(join(work, 'scripts/node20-promise-with-resolvers.mjs'), `// generated by scripts/upstream-suites.mjs: Node < 22 lacks Promise.withResolvers (ES2024), which upstream's code and tests use (its engines: ^22.19 || >=24)
if (typeof Promise.withResolvers !== 'function') {
  Object.defineProperty(Promise, 'withResolvers', {
    configurable: true, writable: true,
    value: function withResolvers() {
      let resolve, reject
      const promise = new this((res, rej) => { resolve = res; reject = rej })
      return { promise, resolve, reject }
    },
  })
}
`)
}
console.log(`   node: ${testNode} (${testNodeInfo.v}${testNodeInfo.withResolvers ? '' : '; Promise.withResolvers polyfilled'})`)
for (const l of excluded) console.log(`   left out: ${l.suite}/${l.file}: ${l.reason}`)

// ---- run
t = Date.now()
const resultsFile = join(work, 'vitest-results.json')
rmSync(resultsFile, { force: true })
const run = spawnSync(testNode, [join(work, 'node_modules/vitest/vitest.mjs'), 'run', '--config', 'vitest.config.mjs',
  '--reporter=dot', '--reporter=json', `--outputFile.json=${resultsFile}`],
{ cwd: work, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, CI: '1', FORCE_COLOR: '0' } })
const vitestSecs = secs(t)
if (!existsSync(resultsFile)) {
  console.error(`upstream-suites: vitest wrote no results (exit ${run.status}):\n${run.stdout}\n${run.stderr}`)
  process.exit(1)
}
const results = JSON.parse(readFileSync(resultsFile, 'utf8'))

// ---- tally per suite, and compare with the expected failures
const expectedAll = JSON.parse(readFileSync(join(vendored, 'expected-failures.json'), 'utf8'))
const listName = opt.package === undefined ? 'reference' : 'package'
const expected = (expectedAll[listName] ?? []).filter(e => opt.suites.includes(e.suite) && !excluded.some(l => l.suite === e.suite && l.file === e.file))
const key = (suite, file, name) => `${suite}/${file} > ${name}`
const expectedKeys = new Map(expected.map(e => [key(e.suite, e.file, e.name), e]))
const tally = {}
const failed = []
const passedKeys = new Set()
const fileErrors = []
for (const file of results.testResults) {
  const rel = file.name.slice(work.length + 1)
  const m = rel.match(/^packages\/core\/([^/]+)\/tests\/(.+)$/)
  const suite = m?.[1] ?? '?'
  const fname = m?.[2] ?? rel
  tally[suite] ??= { passed: 0, failed: 0, skipped: 0, files: 0 }
  tally[suite].files++
  if (file.status === 'failed' && file.assertionResults.length === 0) {
    fileErrors.push({ suite, file: fname, message: file.message })
    tally[suite].failed++
    failed.push({ suite, file: fname, name: '(file failed to load)', message: file.message })
  }
  for (const a of file.assertionResults) {
    const name = [...a.ancestorTitles, a.title].join(' > ')
    if (a.status === 'passed') {
      tally[suite].passed++
      passedKeys.add(key(suite, fname, name))
    } else if (a.status === 'failed') {
      tally[suite].failed++
      failed.push({ suite, file: fname, name, message: (a.failureMessages ?? []).join('\n') })
    } else tally[suite].skipped++
  }
}
console.log(`\n   vitest: ${vitestSecs} s (exit ${run.status})`)
for (const suite of opt.suites) {
  const s = tally[suite] ?? { passed: 0, failed: 0, skipped: 0, files: 0 }
  console.log(`   ${suite}: ${s.files} files, ${s.passed} passed, ${s.failed} failed, ${s.skipped} skipped`)
}
const unexpected = failed.filter(f => !expectedKeys.has(key(f.suite, f.file, f.name)))
const nowPassing = expected.filter(e => passedKeys.has(key(e.suite, e.file, e.name)))
const expectedFailing = failed.filter(f => expectedKeys.has(key(f.suite, f.file, f.name)))
const missing = expected.filter(e => !passedKeys.has(key(e.suite, e.file, e.name)) && !failed.some(f => key(f.suite, f.file, f.name) === key(e.suite, e.file, e.name)))
if (expectedFailing.length > 0) {
  console.log(`\n   expected failures (${listName} list in test-published/upstream/expected-failures.json):`)
  for (const f of expectedFailing) console.log(`     ${key(f.suite, f.file, f.name)}: ${expectedKeys.get(key(f.suite, f.file, f.name)).reason}`)
}
if (unexpected.length > 0) {
  console.log('\n   UNEXPECTED failures:')
  for (const f of unexpected) {
    console.log(`     ${key(f.suite, f.file, f.name)}`)
    const first = (f.message ?? '').split('\n').find(l => l.trim() !== '') ?? ''
    console.log(`       ${first.slice(0, 300)}`)
  }
}
if (nowPassing.length > 0) {
  console.log('\n   expected to fail but PASSED (remove them from the list):')
  for (const e of nowPassing) console.log(`     ${key(e.suite, e.file, e.name)}`)
}
if (missing.length > 0) {
  console.log('\n   listed as expected failures but not run (renamed or left out?):')
  for (const e of missing) console.log(`     ${key(e.suite, e.file, e.name)}`)
}
const ok = unexpected.length === 0 && nowPassing.length === 0 && missing.length === 0
if (!ok && process.env.DSH_UPSTREAM_VERBOSE === '1') console.log(run.stdout, run.stderr)
console.log(`\n== upstream suites: ${ok ? 'as expected' : 'NOT as expected'} (${secs(started)} s in all)`)
if (opt.keep || !ok || opt.dir !== undefined) console.log(`   run folder kept: ${work}`)
else rmSync(work, { recursive: true, force: true })
process.exit(ok ? 0 : 1)
