// The ES module entry: the CommonJS entry's own objects (one registry of
// live sessions for both), with SessionStore as the default export, which
// `ctx.plugin` takes (an ESM import of a CommonJS module's default would be
// its whole `module.exports`). No top-level `await`: a CommonJS host can
// `require()` an ES module that imports this package (Node >= 20.19 /
// 22.12, the `engines` range; the service's peers load the same way).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const core = require('./index.js')

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
  SessionError,
} = core
export default SessionStore
