'use strict'
// A TCP proxy between the store and a PostgreSQL server that can lose a
// COMMIT or its answer (issue 19): the ambiguous commit a network failure
// makes. It reads the client's side of the protocol (the startup packet,
// then typed messages) to find a simple-query `COMMIT`; the server's side
// passes through untouched until then. Connect with sslmode=disable (the
// proxy reads the protocol in clear).
//
//   const proxy = await startProxy(serverPort)
//   proxy.arm('answer-lost')   // the next COMMIT reaches the server; its answer
//                              // is dropped and the client's connection closed
//   proxy.arm('answer-late')   // ... its answer is dropped, the connection stays
//                              // open and silent (the client's deadline ends it)
//   proxy.arm('commit-lost')   // the next COMMIT never reaches the server; the
//                              // client's connection is closed
//   await proxy.fired          // the armed fault happened

const net = require('node:net')

const SSL_REQUEST = 80877103
const GSSENC_REQUEST = 80877104

async function startProxy(targetPort, targetHost = '127.0.0.1') {
  let armed
  let fire
  const state = { fired: undefined }
  const sockets = new Set()

  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, targetHost)
    sockets.add(client)
    sockets.add(upstream)
    let startup = true
    let pending = Buffer.alloc(0)
    /** This connection's fault, once its COMMIT was seen. */
    let fault
    const end = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on('error', end)
    upstream.on('error', end)
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => {
      if (fault !== 'answer-late') client.destroy()
    })

    upstream.on('data', (chunk) => {
      if (fault === undefined) {
        client.write(chunk)
        return
      }
      // The answer to the COMMIT (and anything after it) is lost.
      if (fault === 'answer-lost') client.destroy()
      fire?.()
    })

    client.on('data', (chunk) => {
      if (fault !== undefined) return
      pending = Buffer.concat([pending, chunk])
      let forward = 0
      for (;;) {
        if (startup) {
          if (pending.length - forward < 8) break
          const len = pending.readInt32BE(forward)
          if (pending.length - forward < len) break
          const code = pending.readInt32BE(forward + 4)
          forward += len
          if (code !== SSL_REQUEST && code !== GSSENC_REQUEST) startup = false
          continue
        }
        if (pending.length - forward < 5) break
        const len = pending.readInt32BE(forward + 1)
        if (pending.length - forward < 1 + len) break
        const type = String.fromCharCode(pending[forward])
        const body = pending.subarray(forward + 5, forward + 1 + len)
        const query = type === 'Q' ? body.toString('utf8').replace(/\0$/, '').trim().toUpperCase() : ''
        if (armed !== undefined && query === 'COMMIT') {
          fault = armed
          armed = undefined
          if (fault === 'commit-lost') {
            // What came before the COMMIT reaches the server; the COMMIT never does.
            upstream.write(pending.subarray(0, forward))
            client.destroy()
            // The server sees the connection end and rolls the transaction back.
            upstream.end()
            fire?.()
            pending = Buffer.alloc(0)
            return
          }
          forward += 1 + len
          upstream.write(pending.subarray(0, forward))
          pending = pending.subarray(forward)
          return
        }
        forward += 1 + len
      }
      if (forward > 0) {
        upstream.write(pending.subarray(0, forward))
        pending = pending.subarray(forward)
      }
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: server.address().port,
    /** Lose the next COMMIT's answer (or the COMMIT itself); resolves `fired` when it happened. */
    arm(mode) {
      armed = mode
      state.fired = new Promise((resolve) => {
        fire = () => {
          fire = undefined
          resolve()
        }
      })
      return state.fired
    },
    close() {
      for (const s of sockets) s.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}

module.exports = { startProxy }
