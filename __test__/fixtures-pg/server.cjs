'use strict'
// A throwaway PostgreSQL 15 server of one test's own (issue 19): with TLS
// and a pg_hba.conf of its own, or to stop with SIGSTOP, which the shared
// test server (.ci/run) must never see. Like scripts/pg-test-server.sh it
// runs as the `postgres` user when the tests run as root, on 127.0.0.1 at a
// free port; `stop()` removes it.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const PG_BIN = process.env.DSH_PG_BIN ?? '/usr/lib/postgresql/15/bin'
const root = process.getuid?.() === 0

/**
 * Run a server command, as `postgres` when root; from `/`, which that user
 * can enter even when the checkout is a private (0700) folder.
 */
function asPg(cmd, args) {
  return root
    ? execFileSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { encoding: 'utf8', cwd: '/' })
    : execFileSync(cmd, args, { encoding: 'utf8' })
}

/** Give `file` (or a directory) to the server's user. */
function own(file) {
  if (root) execFileSync('chown', ['-R', 'postgres', file])
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** Whether the PostgreSQL server binaries are here (else the tests using this skip). */
function available() {
  return fs.existsSync(path.join(PG_BIN, 'initdb'))
}

/**
 * Start a server. `settings`: `-c name=value` pairs; `hba`: the lines of
 * its pg_hba.conf (default: trust over TCP from 127.0.0.1); `files`: files
 * to write into its directory first (name -> text, mode 0600, owned by
 * the server's user), e.g. a TLS key and certificate.
 */
async function startServer({ settings = {}, hba, files = {} } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-pg19-'))
  own(dir)
  const data = path.join(dir, 'data')
  asPg(path.join(PG_BIN, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync'])
  for (const [name, text] of Object.entries(files)) {
    const file = path.join(dir, name)
    fs.writeFileSync(file, text, { mode: 0o600 })
    own(file)
  }
  if (hba !== undefined) {
    fs.writeFileSync(path.join(data, 'pg_hba.conf'), `local all all trust\n${hba.join('\n')}\n`)
    own(path.join(data, 'pg_hba.conf'))
  }
  const port = await freePort()
  const opts = [`-h 127.0.0.1 -p ${port} -k ${dir} -c fsync=off`]
  for (const [k, v] of Object.entries(settings)) opts.push(`-c ${k}=${v}`)
  asPg(path.join(PG_BIN, 'pg_ctl'), ['-D', data, '-l', path.join(dir, 'server.log'), '-w', '-t', '60', '-o', opts.join(' '), 'start'])
  const pidOf = () => Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0])
  /** The postmaster and every process it started (its backends and workers). */
  const pids = () => {
    const postmaster = pidOf()
    const out = [postmaster]
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue
      try {
        const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8')
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
        if (ppid === postmaster) out.push(Number(entry))
      } catch {
        // gone meanwhile
      }
    }
    return out
  }
  let stopped = false
  return {
    dir,
    port,
    /** A connection URL for host `host` (default 127.0.0.1) with query parameters `params`. */
    url(params = {}, host = '127.0.0.1') {
      const u = new URL(`postgres://postgres@${host}:${port}/postgres`)
      for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v)
      return u.toString()
    },
    /** Stop (SIGSTOP) or resume (SIGCONT) the postmaster and all its processes, as a frozen VM looks. */
    signal(sig) {
      for (const pid of pids()) {
        try {
          process.kill(pid, sig)
        } catch {
          // exited meanwhile
        }
      }
    },
    log: () => fs.readFileSync(path.join(dir, 'server.log'), 'utf8'),
    stop() {
      if (stopped) return
      stopped = true
      try {
        for (const pid of pids()) process.kill(pid, 'SIGCONT')
      } catch {
        // not running
      }
      try {
        asPg(path.join(PG_BIN, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'])
      } catch {
        // already stopped
      }
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

module.exports = { available, startServer }
