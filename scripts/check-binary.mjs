#!/usr/bin/env node
// What a Linux binary of the addon needs from the system it loads on, read
// from its ELF dynamic section with readelf (binutils; any architecture):
//   node scripts/check-binary.mjs <file.node> <platform>
// gnu: no GLIBC symbol version newer than 2.28 (Debian 10, Ubuntu 20.04,
// RHEL 8), and only glibc's own libraries and libgcc_s; musl: only musl's
// libc (libc.so: Alpine has nothing else by default) and no GLIBC version.
// Prints what it found; exits 1 when the binary needs more.
import { execFileSync } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

export const MAX_GLIBC = [2, 28]
const GLIBC_LIBS = /^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libgcc_s\.so\.1|ld-linux-[a-z0-9_-]+\.so\.\d+)$/
const MUSL_LIBS = /^libc\.so$/

/** `{ needed, newestGlibc, problems }` of the binary at `file` for `platform` (linux-*-gnu or linux-*-musl). */
export function checkBinary(file, platform) {
  const dynamic = execFileSync('readelf', ['--dynamic', '--wide', file], { encoding: 'utf8' })
  const needed = [...dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1])
  const versions = execFileSync('readelf', ['--version-info', '--wide', file], { encoding: 'utf8' })
  const glibc = [...versions.matchAll(/GLIBC_(\d+)\.(\d+)(?:\.\d+)?/g)].map((m) => [Number(m[1]), Number(m[2])])
  const newest = glibc.reduce((a, b) => (a === null || b[0] > a[0] || (b[0] === a[0] && b[1] > a[1]) ? b : a), null)
  const problems = []
  if (platform.endsWith('-gnu')) {
    if (newest === null) problems.push('no GLIBC symbol versions: not a glibc binary')
    else if (newest[0] > MAX_GLIBC[0] || (newest[0] === MAX_GLIBC[0] && newest[1] > MAX_GLIBC[1])) problems.push(`needs GLIBC_${newest.join('.')} (at most ${MAX_GLIBC.join('.')})`)
    for (const lib of needed) if (!GLIBC_LIBS.test(lib)) problems.push(`needs ${lib}, which is not part of glibc`)
  } else if (platform.endsWith('-musl')) {
    if (newest !== null) problems.push(`needs GLIBC_${newest.join('.')}: a glibc binary, not musl`)
    for (const lib of needed) if (!MUSL_LIBS.test(lib)) problems.push(`needs ${lib}, not only musl's libc`)
    if (!needed.some((lib) => MUSL_LIBS.test(lib))) problems.push('does not link musl\'s libc.so')
  } else {
    problems.push(`${platform} is not a Linux platform`)
  }
  return { needed, newestGlibc: newest === null ? null : `GLIBC_${newest.join('.')}`, problems }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [file, platform] = process.argv.slice(2)
  if (file === undefined || platform === undefined) {
    console.error('usage: node scripts/check-binary.mjs <file.node> <linux platform, e.g. linux-x64-musl>')
    process.exit(64)
  }
  const { needed, newestGlibc, problems } = checkBinary(file, platform)
  console.log(`check-binary: ${path.basename(file)} (${platform}): needs ${needed.join(', ') || 'nothing'}${newestGlibc ? `; newest ${newestGlibc}` : ''}`)
  for (const p of problems) console.log(`check-binary: FAIL ${p}`)
  process.exit(problems.length === 0 ? 0 : 1)
}
