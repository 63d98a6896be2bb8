// Types of the ES module entry (index.mjs): everything index.d.ts declares,
// and the SessionStore class as the default export, which `ctx.plugin`
// takes. (A default import of the CommonJS entry is its whole exports.)
import { SessionStore } from './index.js'

export * from './index.js'
export default SessionStore
