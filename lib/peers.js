'use strict'
// The SessionStore service's peers (SPEC 12.1): cordis 4 and
// @deepseek-ai/dsh-scope, taken from the consumer, never bundled.
//
// dsh-scope keeps its scope tag and carrier registry module-private, and the
// service must subclass the consumer's `Service`: so both are resolved from
// this package's directory (the consumer's node_modules), and cordis from
// dsh-scope's own location, under the name dsh-scope itself declares
// (`@deepseek-ai/cordis` for the published packages, `cordis` in the
// monorepo). Both are ESM-only; they are loaded on first use with require(),
// which loads ES modules on Node >= 20.19 and >= 22.12
// (`process.features.require_module`, the package's `engines` range),
// sharing the one module instance an `import` gets. Where require() cannot
// load them (an older Node, or --no-experimental-require-module), the first
// construction throws PEER_LOAD saying so.

const path = require('node:path')
const { createRequire } = require('node:module')

const SCOPE = '@deepseek-ai/dsh-scope'
const CORDIS_NAMES = ['@deepseek-ai/cordis', 'cordis']

const { fail: coded } = require('./errors.js')

function fail(message, code, cause) {
  return coded(message, code, { cause })
}

let peers
let located

/** Where the peers are: `{ scope, cordis, cordisName }` paths, or throws `PEER_MISSING`. */
function locatePeers() {
  if (located !== undefined) return located
  const here = path.dirname(__dirname)
  let scope
  try {
    scope = require.resolve(SCOPE)
  } catch (error) {
    throw fail(
      `SessionStore needs the peer dependency ${SCOPE} (with cordis 4); it cannot be resolved from ${here}`,
      'PEER_MISSING',
      error,
    )
  }
  const fromScope = createRequire(scope)
  // The cordis name dsh-scope declares wins; else the first that resolves.
  let declared = []
  try {
    const manifest = fromScope(`${SCOPE}/package.json`)
    const deps = { ...manifest.devDependencies, ...manifest.dependencies, ...manifest.peerDependencies }
    declared = CORDIS_NAMES.filter((name) => deps[name] !== undefined)
  } catch {
    // A dsh-scope without an exported package.json: try both names.
  }
  const names = [...declared, ...CORDIS_NAMES.filter((name) => !declared.includes(name))]
  for (const name of names) {
    try {
      located = { scope, cordis: fromScope.resolve(name), cordisName: name }
      return located
    } catch {
      // Try the next name.
    }
  }
  throw fail(
    `SessionStore needs cordis 4 (as "@deepseek-ai/cordis" or "cordis") beside ${SCOPE}; neither resolves from ${path.dirname(scope)}`,
    'PEER_MISSING',
  )
}

function check(cordis, scope) {
  if (typeof cordis?.Service !== 'function' || typeof cordis?.Context !== 'function') {
    throw fail('SessionStore peer cordis does not export Service and Context (cordis 4 expected)', 'PEER_MISSING')
  }
  if (typeof scope?.scopeOf !== 'function' || typeof scope?.scopeTarget !== 'function') {
    throw fail(`SessionStore peer ${SCOPE} does not export scopeOf and scopeTarget`, 'PEER_MISSING')
  }
  return { Service: cordis.Service, Context: cordis.Context, scopeOf: scope.scopeOf, scopeTarget: scope.scopeTarget }
}

/** The peers, loaded on first call: `{ Service, Context, scopeOf, scopeTarget }`. */
function loadPeers() {
  if (peers !== undefined) return peers
  const where = locatePeers()
  let cordis
  let scope
  try {
    cordis = require(where.cordis)
    scope = require(where.scope)
  } catch (error) {
    if (error?.code === 'ERR_REQUIRE_ESM') {
      throw fail(
        `SessionStore loads its ESM-only peers with require(), which needs Node >= 20.19 or >= 22.12 (this is ${process.version}; `
          + 'the range in its package.json "engines"), without --no-experimental-require-module',
        'PEER_LOAD',
        error,
      )
    }
    throw error
  }
  peers = check(cordis, scope)
  return peers
}

module.exports = { loadPeers }
