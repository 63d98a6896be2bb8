// Issue 19: TLS with libpq's conventions in the connection string. Three
// throwaway servers with a certificate from a throwaway CA (made here with
// openssl): one that offers TLS, one without it, one that accepts only TLS
// (hostssl-only pg_hba.conf, with a client-certificate user). Each sslmode
// connects as libpq would, and each refusal is PG_CONNECT naming why.

import { execFileSync } from 'node:child_process'
import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { asEvents, header, PostgresSessionStore, rejection, turns, type SessionStore } from './fixtures-crash/stores.js'

const nodeRequire = createRequire(__filename)
const { available, startServer } = nodeRequire('./fixtures-pg/server.cjs') as typeof import('./fixtures-pg/server.cjs')
type Server = Awaited<ReturnType<typeof startServer>>

const canRun = available() && process.platform === 'linux'

/** A CA, a server certificate for DNS name `localhost` only, a client certificate for `certuser`, and another CA. */
function makeCertificates(dir: string): Record<string, string> {
  const ssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  for (const ca of ['ca', 'other-ca']) {
    ssl(['req', '-x509', ...ec, '-keyout', `${ca}.key`, '-out', `${ca}.crt`, '-days', '2', '-subj', `/CN=dsh test ${ca}`,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'])
  }
  const leaf = (name: string, cn: string, ext: string) => {
    ssl(['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`])
    fs.writeFileSync(path.join(dir, `${name}.ext`), ext)
    ssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`])
  }
  leaf('server', 'localhost', 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n')
  leaf('client', 'certuser', 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n')
  const read = (f: string) => fs.readFileSync(path.join(dir, f), 'utf8')
  return { 'server.crt': read('server.crt'), 'server.key': read('server.key'), 'ca.crt': read('ca.crt') }
}

describe.skipIf(!canRun)('issue 19: PostgreSQL over TLS (sslmode, sslrootcert, sslcert/sslkey)', () => {
  let certs: string
  let offers: Server
  let plain: Server
  let only: Server
  const stores: SessionStore[] = []

  beforeAll(async () => {
    certs = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-pg19-certs-'))
    const files = makeCertificates(certs)
    // Each server reads its own copies (paths relative to its data directory).
    const tls = { ssl: 'on', ssl_cert_file: '../server.crt', ssl_key_file: '../server.key', ssl_ca_file: '../ca.crt' }
    offers = await startServer({ files, settings: tls })
    plain = await startServer({})
    only = await startServer({
      files,
      settings: tls,
      hba: ['hostssl all certuser 127.0.0.1/32 cert', 'hostssl all postgres 127.0.0.1/32 trust'],
    })
    execFileSync('psql', ['-h', only.dir, '-p', String(only.port), '-U', 'postgres', '-X', '-q', '-c', 'CREATE ROLE certuser LOGIN SUPERUSER'])
  }, 120_000)

  afterAll(async () => {
    for (const s of stores) await s.close()
    for (const s of [offers, plain, only]) s?.stop()
    if (certs !== undefined) fs.rmSync(certs, { recursive: true, force: true })
  })

  function store(url: string): SessionStore {
    const s = new PostgresSessionStore({ connectionString: url, schema: 'tls', connectTimeoutMs: 5000 })
    stores.push(s)
    return s
  }

  /** Whether the store's connection named `app` is encrypted, as the server sees it. */
  function encrypted(server: Server, app: string): boolean {
    const out = execFileSync('psql', ['-h', server.dir, '-p', String(server.port), '-U', 'postgres', '-X', '-A', '-t', '-c',
      `SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '${app}'`], { encoding: 'utf8' })
    const rows = out.trim().split('\n').filter(Boolean)
    if (rows.length === 0) throw new Error(`no connection named ${app}`)
    return rows.every((r) => r === 't')
  }

  /** A write and a read through the store: it connected. */
  async function works(s: SessionStore, id: string): Promise<void> {
    await s.create(header(id))
    await s.append(id, asEvents(turns(1)))
    expect((await s.load(id)).events).toEqual(turns(1))
  }

  const ca = () => path.join(certs, 'ca.crt')

  it('sslmode=disable connects in clear, the default (prefer) and require with TLS, without checking the certificate', async () => {
    await works(store(offers.url({ sslmode: 'disable', application_name: 'tls-disable' })), 'disable')
    expect(encrypted(offers, 'tls-disable')).toBe(false)
    await works(store(offers.url({ application_name: 'tls-prefer' })), 'prefer')
    expect(encrypted(offers, 'tls-prefer')).toBe(true)
    await works(store(offers.url({ sslmode: 'require', application_name: 'tls-require' })), 'require')
    expect(encrypted(offers, 'tls-require')).toBe(true)
  })

  it('verify-ca checks the chain against sslrootcert, not the host name; verify-full checks both', async () => {
    await works(store(offers.url({ sslmode: 'verify-ca', sslrootcert: ca(), application_name: 'tls-verify-ca' })), 'verify-ca')
    expect(encrypted(offers, 'tls-verify-ca')).toBe(true)
    // The certificate names `localhost`; the address stays 127.0.0.1.
    const full = offers.url({ sslmode: 'verify-full', sslrootcert: ca(), hostaddr: '127.0.0.1', application_name: 'tls-verify-full' }, 'localhost')
    await works(store(full), 'verify-full')
    expect(encrypted(offers, 'tls-verify-full')).toBe(true)
    // libpq: require with a root certificate file verifies the chain too.
    const wrongRoots = await rejection(store(offers.url({ sslmode: 'require', sslrootcert: path.join(certs, 'other-ca.crt') })).list())
    expect(wrongRoots.code).toBe('PG_CONNECT')
  })

  it('refuses a certificate from another CA, a host name it does not name, and system roots that lack the CA: PG_CONNECT naming why', async () => {
    const wrongCa = await rejection(store(offers.url({ sslmode: 'verify-ca', sslrootcert: path.join(certs, 'other-ca.crt') })).list())
    expect(wrongCa.code).toBe('PG_CONNECT')
    expect(wrongCa.message).toMatch(/^cannot connect to PostgreSQL database "postgres" on 127\.0\.0\.1:\d+ \(schema "tls"\): TLS handshake failed: the server's certificate is not signed by a trusted certificate authority \(sslrootcert ".*other-ca\.crt"; sslmode=verify-ca\)$/)
    const wrongHost = await rejection(store(offers.url({ sslmode: 'verify-full', sslrootcert: ca() })).list())
    expect(wrongHost.code).toBe('PG_CONNECT')
    expect(wrongHost.message).toContain('TLS handshake failed: the server\'s certificate is not valid for host "127.0.0.1" (sslmode=verify-full checks the host name')
    const system = await rejection(store(offers.url({ sslmode: 'verify-full', hostaddr: '127.0.0.1' }, 'localhost')).list())
    expect(system.code).toBe('PG_CONNECT')
    expect(system.message).toMatch(/not signed by a trusted certificate authority \(the system's trusted roots|the system has none/)
  })

  it('a server without TLS: require is refused naming it, prefer connects in clear', async () => {
    const refused = await rejection(store(plain.url({ sslmode: 'require' })).list())
    expect(refused.code).toBe('PG_CONNECT')
    expect(refused.message).toContain('the server does not accept TLS connections, and sslmode=require requires TLS')
    await works(store(plain.url({ sslmode: 'prefer', application_name: 'plain-prefer' })), 'plain')
    expect(encrypted(plain, 'plain-prefer')).toBe(false)
  })

  it('a server that accepts only TLS: disable is refused naming it; a client certificate (sslcert, sslkey) authenticates', async () => {
    const refused = await rejection(store(only.url({ sslmode: 'disable' })).list())
    expect(refused.code).toBe('PG_CONNECT')
    expect(refused.message).toContain('the server requires TLS for this connection (sslmode=disable): use sslmode=require, verify-ca or verify-full')
    await works(store(only.url({ sslmode: 'require', application_name: 'only-require' })), 'only')
    expect(encrypted(only, 'only-require')).toBe(true)
    const asCertUser = (params: Record<string, string>) => {
      const u = new URL(only.url({ sslmode: 'verify-full', sslrootcert: ca(), hostaddr: '127.0.0.1', ...params }, 'localhost'))
      u.username = 'certuser'
      return u.toString()
    }
    await works(store(asCertUser({ sslcert: path.join(certs, 'client.crt'), sslkey: path.join(certs, 'client.key'), application_name: 'cert' })), 'cert')
    expect(encrypted(only, 'cert')).toBe(true)
    const noCert = await rejection(store(asCertUser({})).list())
    expect(noCert.code).toBe('PG_CONNECT')
    expect(noCert.message).toContain('certificate')
  })

  it('refuses TLS options it cannot honour, and a missing sslrootcert file, naming them', async () => {
    const make = (url: string) => () => new PostgresSessionStore({ connectionString: url })
    expect(() => make(offers.url({ sslmode: 'allow' }))()).toThrow(/sslmode "allow" is not one of disable, prefer, require, verify-ca, verify-full/)
    expect(() => make(offers.url({ sslcrl: '/x.crl' }))()).toThrow(/sslcrl is not supported by this client/)
    const missing = await rejection(store(offers.url({ sslmode: 'verify-full', sslrootcert: '/nonexistent/ca.crt' })).list())
    expect(missing.code).toBe('PG_CONNECT')
    expect(missing.message).toContain('cannot read sslrootcert "/nonexistent/ca.crt"')
  })
})
