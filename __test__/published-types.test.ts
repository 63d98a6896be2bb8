// PUB 13, 2.5, 12.1: the hand-written declarations of the published package,
// type-checked by tsc over __test__/published-types/types.mts (expectTypeOf and
// @ts-expect-error). The same file is checked against the reference
// 0.1.1-rc.2 declarations, so both satisfy one set of expectations. The peers'
// types resolve from test-published/ through that folder's tsconfig paths, and
// the package is imported under upstream's name, as the npm alias installs it.
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
function check(config: string): string {
  try {
    execFileSync(process.execPath, [tsc, '-p', `__test__/published-types/${config}`], { encoding: 'utf8', stdio: 'pipe' })
    return ''
  } catch (e) {
    return String((e as { stdout?: string }).stdout ?? e)
  }
}

describe('PUB 13 declarations', () => {
  it('the native-published declarations satisfy the type tests', () => {
    expect(check('tsconfig.json')).toBe('')
  })
  it('the reference 0.1.1-rc.2 declarations satisfy the same type tests', () => {
    expect(check('tsconfig.reference.json')).toBe('')
  })
})
