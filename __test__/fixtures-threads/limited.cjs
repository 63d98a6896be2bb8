'use strict'
// Thread-limit child (threads-limit.test.ts), run as an unprivileged user:
//
//   node limited.cjs <spare>
//
// It builds a long log, a JSONL store holding it and a long seed, warms the
// libuv pool, then caps the threads its user may have (RLIMIT_NPROC, set by
// `prlimit` on this process) at those it has plus <spare>. It then runs the
// calls that start helper threads and prints one line per call, `CALL
// {"call", "outcome" ("ok" or the error's code), "message"?}`, then `END`.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { Session, JsonlSessionStore } = require('../../index.js')

const say = (line) => process.stdout.write(`${line}\n`)
const USER = { kind: 'user' }

function longSession(id) {
  const s = new Session(id)
  s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
  // Past two reading pieces (1 MiB) and 4096 lines: the reads use their threads.
  for (let i = 0; i < 20000; i++) {
    s.append('user/message', { content: [{ type: 'text', text: `message ${i} ${'x'.repeat(100)}` }], source: USER }, { surfaceOp: 'append' })
  }
  return s
}

/** Tasks (threads) of all processes of `uid`: what RLIMIT_NPROC counts. */
function tasksOf(uid) {
  let n = 0
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
      if (Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) !== uid) continue
      n += Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? 0)
    } catch {
      // A process that ended meanwhile.
    }
  }
  return n
}

async function main() {
  const dir = fs.mkdtempSync(path.join(process.env.DSH_LIMIT_TMP ?? os.tmpdir(), 'limited-'))
  const long = longSession('long')
  const jsonl = long.toJsonl()
  const bytes = Buffer.from(jsonl)
  const seed = long.events
  const store = new JsonlSessionStore({ root: dir })
  await store.flush(long)
  await store.close()
  const reader = new JsonlSessionStore({ root: dir })
  // Warm the libuv pool (its threads start at its first job).
  await fs.promises.stat(dir)

  const limit = tasksOf(process.getuid()) + Number(process.argv[2])
  const set = spawnSync('prlimit', [`--pid=${process.pid}`, `--nproc=${limit}:${limit}`], { encoding: 'utf8' })
  if (set.status !== 0) throw new Error(`prlimit: ${set.stderr}`)
  say(`LIMIT ${limit}`)

  const attempt = async (name, f) => {
    try {
      await f()
      say(`CALL ${JSON.stringify({ call: name, outcome: 'ok' })}`)
    } catch (e) {
      say(`CALL ${JSON.stringify({ call: name, outcome: e?.code ?? 'NONE', message: String(e?.message ?? e) })}`)
    }
  }
  const same = (s) => {
    // A store adds the closer of the open turn.
    if (s.seq < long.seq) throw new Error(`read ${s.seq} events of ${long.seq}`)
    s.deriveMessages()
  }
  await attempt('fromJsonl(Buffer)', () => same(Session.fromJsonl(bytes)))
  await attempt('fromJsonl(string)', () => same(Session.fromJsonl(jsonl)))
  await attempt('new Session(seed)', () => same(new Session('seeded', seed)))
  await attempt('store.open', async () => same(await reader.open('long')))
  await attempt('store.load', async () => {
    const loaded = await reader.load('long')
    if (loaded.events.length < long.seq) throw new Error('short load')
  })
  await attempt('store.close', () => reader.close())
  say('END')
}

main().then(
  () => process.exit(0),
  (e) => {
    say(`FAILED ${JSON.stringify(String(e?.stack ?? e))}`)
    process.exit(1)
  },
)
