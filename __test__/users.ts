// Tests that run a command as another user (nobody, uid 65534, the way a
// root run makes a file unreadable). That user must be able to run Node
// with this checkout's package and reach the temp dir; a clone in a private
// folder (under /root, or any 0700 directory) is not readable by it, and
// such tests skip, saying why.

import { spawnSync } from 'node:child_process'
import * as os from 'node:os'
import * as path from 'node:path'

const ROOT = path.resolve(__dirname, '..')

/** The user a root run switches to: nobody. */
export const NOBODY = { uid: 65534, gid: 65534 }

let probed: string | undefined | null = null

/**
 * Why uid 65534 cannot run the package from this checkout (loading
 * index.js and its addon, and listing the temp dir), as a skip reason;
 * undefined when it can. Only root can switch users: call it as root.
 * Probed once per test file; the reason is printed when there is one.
 */
export function nobodyCannotRun(): string | undefined {
  if (probed !== null) return probed
  const probe = spawnSync(
    process.execPath,
    ['-e', 'require(process.argv[1]); require("node:fs").readdirSync(process.argv[2])', path.join(ROOT, 'index.js'), os.tmpdir()],
    { ...NOBODY, cwd: ROOT, encoding: 'utf8' },
  )
  probed =
    probe.status === 0
      ? undefined
      : `skipped: uid ${NOBODY.uid} cannot read the checkout at ${ROOT} or the temp dir ${os.tmpdir()} (a 0700 folder?): ${
          probe.error?.message ?? (probe.stderr.split('\n').find((l) => /Error|EACCES/.test(l)) ?? `exit status ${probe.status}`).trim()
        }`
  if (probed !== undefined) console.warn(probed)
  return probed
}
