// Issue 19: lease holders by token, not by pid alone. A writer in another
// PID namespace (a container sharing the host's name and network) has a
// pid that means nothing here: `kill(pid, 0)` may find no such process
// while it runs. Its lease is waited out to its expiry, never taken over
// at once; a dead holder of this process's own namespace still is (the
// store-11-lease tests).

import { execFileSync } from 'node:child_process'
import * as os from 'node:os'
import { describe, expect, it } from 'vitest'
import { type Holder, spawnHolder } from './fixtures-crash/holder.js'
import { asEvents, header, PG_URL, pgDump, pgSchema, pgStore, psqlExec, rejection, testCleanup, turnBatches, turns } from './fixtures-crash/stores.js'

const { cleanup, dirFor } = testCleanup()

function canUnshare(): boolean {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return false
  try {
    execFileSync('unshare', ['--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** A pid no process of this namespace has, below pid_max, for the child to get in its own namespace. */
function freePid(): number {
  const max = Math.min(Number(execFileSync('cat', ['/proc/sys/kernel/pid_max'], { encoding: 'utf8' })), 1 << 22)
  for (let pid = max - 100; pid > 300; pid -= 37) {
    try {
      process.kill(pid, 0)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') return pid
    }
  }
  throw new Error('no free pid')
}

describe.skipIf(PG_URL === undefined || !canUnshare())('issue 19: a PostgreSQL lease held from another PID namespace', () => {
  it('is refused with SESSION_IN_USE while it lasts, though its pid is dead here, and is taken over only once expired', async () => {
    const dir = dirFor('pg19-pidns')
    const pid = freePid()
    // The holder runs in a new PID namespace, as pid `pid` there.
    const prefix = ['unshare', '--pid', '--fork', '--mount-proc', '--kill-child', 'sh', '-c',
      `echo ${pid - 1} > /proc/sys/kernel/ns_last_pid && "$0" "$@"; exit $?`]
    const holder: Holder = await spawnHolder('postgres', dir, 's', prefix)
    cleanup.push(() => holder.kill())
    expect(holder.pid).toBe(pid)
    expect((await holder.order('turn')).error).toBeUndefined()
    // Same host name and kernel, and no process `pid` in this namespace.
    expect(pgDump(dir, 's').lease).toMatchObject({ host: os.hostname(), pid })
    expect(() => process.kill(pid, 0)).toThrow(/ESRCH/)

    const store = pgStore(dir)
    cleanup.push(() => store.close())
    const refused = await rejection(store.append('s', asEvents(turnBatches(2, 9).flat())))
    expect(refused.code).toBe('SESSION_IN_USE')
    expect(refused.message).toContain(`session "s" is in use: its write lease is held by process ${pid} on host ${JSON.stringify(os.hostname())}, epoch 1`)
    expect(refused.message).toContain('nothing was written')
    // A reader's load takes nothing either; the holder keeps writing.
    expect((await store.load('s')).events).toEqual(turns(1))
    expect((await holder.order('turn')).error).toBeUndefined()
    expect(pgDump(dir, 's').lease).toMatchObject({ epoch: 1, pid })

    // Its lease expires (as leaseMs after its last write would): now it is taken over.
    psqlExec(`UPDATE ${pgSchema(dir)}.leases SET expires_at = now() - interval '1 second' WHERE session_id = 's'`)
    await store.append('s', asEvents(turnBatches(3, 18).flat()))
    expect(pgDump(dir, 's').lease).toMatchObject({ epoch: 2, pid: process.pid })
    // The old holder never writes again.
    const lost = await holder.order('turn')
    expect(lost.error?.code).toBe('LEASE_LOST')
    const reader = pgStore(dir)
    cleanup.push(() => reader.close())
    expect((await reader.load('s')).events).toEqual([...holder.acked, ...turnBatches(3, 18).flat()])
  })
})
