// The ES module entry: the CommonJS entry's own objects (one registry of
// live sessions for both), with SessionStore as the default export, which
// `ctx.plugin` takes (an ESM import of a CommonJS module's default would be
// its whole `module.exports`).
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'

const require = createRequire(import.meta.url)
const core = require('./index.js')

// Where require() cannot load ES modules (Node < 20.19 / 22.12), import the
// service's peers here, when they are installed, and hand them over.
if (!process.features?.require_module) {
  const peers = require('./lib/peers.js')
  let where
  try {
    where = peers.locatePeers()
  } catch {
    // No peers: everything but SessionStore works.
  }
  if (where !== undefined) {
    const [cordis, scope] = await Promise.all([
      import(pathToFileURL(where.cordis).href),
      import(pathToFileURL(where.scope).href),
    ])
    peers.providePeers(cordis, scope)
  }
}

export const {
  Session,
  SessionId,
  SESSION_FORMAT_VERSION,
  isJsonValue,
  snapshotJsonValue,
  isSurfaceEligibleType,
  isSurfaceEvent,
  foldSurface,
  deriveEventMessage,
  renderContextContent,
  canonicalHeader,
  headerEquals,
  foldRequestHeader,
  interruptedTurnClosers,
  checkSessionInvariants,
  JsonlSessionStore,
  SqliteSessionStore,
  PostgresSessionStore,
  SessionStore,
  SessionForkError,
} = core
export default SessionStore
