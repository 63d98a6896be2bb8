'use strict'
// A CommonJS host that require()s an ES module plugin importing the package
// (Node >= 20.19 / 22.12 load ES modules with require(), unless one in the
// graph has a top-level await: ERR_REQUIRE_ASYNC_MODULE). Prints one JSON line.
const plugin = require('./plugin.mjs')
const { Context } = require('@deepseek-ai/cordis')
const cjs = require('dsh-session-native')

async function main() {
  const ctx = new Context()
  await ctx.plugin(plugin.SessionStore)
  const session = plugin.start(ctx, 'required-esm')
  process.stdout.write(`${JSON.stringify({
    node: process.version,
    sameObjects: plugin.Session === cjs.Session && plugin.SessionStore === cjs.SessionStore,
    id: session.id,
    messages: session.deriveMessages().length,
  })}\n`)
}

main().catch((error) => {
  process.stdout.write(`${JSON.stringify({ node: process.version, code: error.code, message: error.message })}\n`)
})
