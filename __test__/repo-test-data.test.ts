// The repository carries its own test data (test-data/, a copy of
// ../shared's fixtures and workload); `npm run refresh-shared` refreshes it
// when ../shared is beside the clone, and `-- --check` reports differences.

import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

const ROOT = path.resolve(__dirname, '..')
const SHARED = path.resolve(ROOT, '..', 'shared')
const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

/** A repo with the script and a test-data/ tree, and optionally a ../shared beside it. */
function tree(withShared: boolean): { repo: string; shared: string } {
  const top = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-refresh-'))
  dirs.push(top)
  const repo = path.join(top, 'repo')
  const shared = path.join(top, 'shared')
  fs.mkdirSync(path.join(repo, 'scripts'), { recursive: true })
  fs.copyFileSync(path.join(ROOT, 'scripts', 'refresh-shared.mjs'), path.join(repo, 'scripts', 'refresh-shared.mjs'))
  const write = (file: string, text: string) => {
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, text)
  }
  write(path.join(repo, 'test-data', 'fixtures', 'same.json'), '1')
  write(path.join(repo, 'test-data', 'fixtures', 'old.json'), 'gone upstream')
  write(path.join(repo, 'test-data', 'fixtures', 'logs', 'a.jsonl'), 'before')
  write(path.join(repo, 'test-data', 'bench', 'workload.mjs'), 'export {}')
  write(path.join(repo, 'test-data', 'fixtures-published', 'logs', 'p.jsonl'), 'published')
  if (withShared) {
    write(path.join(shared, 'fixtures-published', 'logs', 'p.jsonl'), 'published')
    write(path.join(shared, 'fixtures', 'same.json'), '1')
    write(path.join(shared, 'fixtures', 'logs', 'a.jsonl'), 'after')
    write(path.join(shared, 'fixtures', 'logs', 'b.jsonl'), 'new')
    write(path.join(shared, 'bench', 'workload.mjs'), 'export {}')
  }
  return { repo, shared }
}

const refresh = (repo: string, ...args: string[]) =>
  spawnSync(process.execPath, [path.join(repo, 'scripts', 'refresh-shared.mjs'), ...args], { encoding: 'utf8' })

describe('test data in the repository', () => {
  it('holds the fixtures and the workload the tests read', () => {
    for (const f of ['fixtures/manifest.json', 'fixtures/load', 'fixtures/logs', 'fixtures/real', 'fixtures/expected', 'bench/workload.mjs', 'fixtures-published/logs']) {
      expect(fs.existsSync(path.join(ROOT, 'test-data', f))).toBe(true)
    }
  })

  it.skipIf(!fs.existsSync(SHARED))('matches ../shared when it is beside the clone', () => {
    const run = refresh(ROOT, '--check')
    expect(run.stdout).toContain('test-data/ matches ../shared')
    expect(run.status).toBe(0)
  })

  it('--check names each new, changed and gone file and fails, changing nothing', () => {
    const { repo } = tree(true)
    const run = refresh(repo, '--check')
    expect(run.status).toBe(1)
    expect(run.stdout).toContain(`new: ${path.join('fixtures', 'logs', 'b.jsonl')}`)
    expect(run.stdout).toContain(`changed: ${path.join('fixtures', 'logs', 'a.jsonl')}`)
    expect(run.stdout).toContain(`gone: ${path.join('fixtures', 'old.json')}`)
    expect(run.stdout).not.toContain('same.json')
    expect(fs.readFileSync(path.join(repo, 'test-data', 'fixtures', 'logs', 'a.jsonl'), 'utf8')).toBe('before')
  })

  it('refreshes test-data/ to a copy of ../shared', () => {
    const { repo } = tree(true)
    expect(refresh(repo).status).toBe(0)
    expect(fs.readFileSync(path.join(repo, 'test-data', 'fixtures', 'logs', 'a.jsonl'), 'utf8')).toBe('after')
    expect(fs.existsSync(path.join(repo, 'test-data', 'fixtures', 'logs', 'b.jsonl'))).toBe(true)
    expect(fs.existsSync(path.join(repo, 'test-data', 'fixtures', 'old.json'))).toBe(false)
    expect(refresh(repo, '--check').status).toBe(0)
  })

  it('keeps test-data/ as committed when ../shared is absent', () => {
    const { repo } = tree(false)
    const run = refresh(repo)
    expect(run.status).toBe(0)
    expect(run.stdout).toContain('test-data/ stays as committed')
    expect(fs.readFileSync(path.join(repo, 'test-data', 'fixtures', 'logs', 'a.jsonl'), 'utf8')).toBe('before')
  })
})
