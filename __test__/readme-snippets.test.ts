// The README's code: every ```ts and ```js snippet compiles under
// `tsc --strict` against the package's own types, as a user copying it
// would compile it (the package resolved by its name, `module: nodenext`).

import { execFileSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

const ROOT = path.resolve(__dirname, '..')
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')

interface Snippet {
  lang: 'ts' | 'js'
  line: number
  code: string
}

/** The fenced ```ts and ```js blocks of a markdown text, with their first line. */
export function snippets(markdown: string): Snippet[] {
  const found: Snippet[] = []
  const lines = markdown.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(ts|js|typescript|javascript)\s*$/.exec(lines[i]!)
    if (open === null) continue
    const start = i + 1
    let end = start
    while (end < lines.length && !lines[end]!.startsWith('```')) end++
    found.push({ lang: open[1]!.startsWith('t') ? 'ts' : 'js', line: start + 1, code: lines.slice(start, end).join('\n') })
    i = end
  }
  return found
}

/**
 * A compilable file for a snippet. JS snippets are CommonJS checked as JS
 * (`checkJs`), inside an async function so a snippet may `await`; a snippet
 * that uses a `session` it does not make (the attach example) gets one.
 */
function fileFor(s: Snippet): { name: string; text: string } {
  const tag = `readme-line-${s.line}`
  if (s.lang === 'ts') return { name: `${tag}.ts`, text: `export {}\n${s.code}\n` }
  const text = [
    '// @ts-check',
    "/** @type {import('dsh-session-native').Session} */",
    "const session = new (require('dsh-session-native').Session)('readme')",
    'async function snippet() {',
    s.code,
    '}',
    'module.exports = { snippet, session }',
    '',
  ].join('\n')
  return { name: `${tag}.cjs`, text }
}

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

describe('README snippets', () => {
  const all = snippets(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'))

  it('finds the TypeScript and JavaScript examples', () => {
    expect(all.filter((s) => s.lang === 'ts').length).toBeGreaterThan(0)
    expect(all.filter((s) => s.lang === 'js').length).toBeGreaterThanOrEqual(3)
  })

  it('compile under tsc --strict with the package resolved by name', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-readme-'))
    dirs.push(dir)
    fs.mkdirSync(path.join(dir, 'node_modules'))
    fs.symlinkSync(ROOT, path.join(dir, 'node_modules', 'dsh-session-native'), 'junction')
    fs.symlinkSync(path.join(ROOT, 'node_modules', '@types'), path.join(dir, 'node_modules', '@types'), 'junction')
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'readme-check', private: true, type: 'commonjs' }))
    const files = all.map(fileFor)
    for (const f of files) fs.writeFileSync(path.join(dir, f.name), f.text)
    const args = [TSC, '--strict', '--noEmit', '--allowJs', '--checkJs', '--module', 'nodenext', '--moduleResolution', 'nodenext',
      '--target', 'es2022', '--types', 'node', '--skipLibCheck', ...files.map((f) => f.name)]
    let output = ''
    try {
      execFileSync(process.execPath, args, { cwd: dir, encoding: 'utf8' })
    } catch (error) {
      output = String((error as { stdout?: string }).stdout ?? error)
    }
    // Each diagnostic names its file: readme-line-N is the README line the snippet starts on.
    expect(output).toBe('')
  }, 120_000)
})
