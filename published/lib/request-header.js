// Request headers (PUB 8, SPEC 7); the legacy request vocabulary's rule is
// the native core's (event::refuse_legacy). Plain JavaScript with no
// imports: the config comparison is the contract's field-wise rule, written
// here instead of importing dsh-llm.

/** PUB 8: `{config, adapterDefaults?, system?, tools?}`, in that key order. */
export function canonicalHeader(header) {
  const out = { config: header.config }
  const defaults = header.adapterDefaults
  if (defaults?.reasoningEffort === true || defaults?.maxTokens === true) out.adapterDefaults = defaults
  if (header.system !== undefined && header.system.length > 0) out.system = header.system
  if (header.tools !== undefined && header.tools.length > 0) out.tools = header.tools
  return out
}

/** PUB 8: config field-wise; `stop` element-wise, absent equal only to absent. */
function sameConfig(a, b) {
  if (a.provider !== b.provider || a.model !== b.model || a.reasoningEffort !== b.reasoningEffort
    || a.temperature !== b.temperature || a.maxTokens !== b.maxTokens) return false
  if (a.stop === undefined || b.stop === undefined) return a.stop === b.stop
  if (a.stop.length !== b.stop.length) return false
  for (let i = 0; i < a.stop.length; i++) if (a.stop[i] !== b.stop[i]) return false
  return true
}

/** PUB 8: equality of canonical headers; tools in order by JSON text, absent equals empty. */
export function headerEquals(a, b) {
  if (!sameConfig(a.config, b.config)
    || a.adapterDefaults?.reasoningEffort !== b.adapterDefaults?.reasoningEffort
    || a.adapterDefaults?.maxTokens !== b.adapterDefaults?.maxTokens
    || a.system !== b.system) return false
  const at = a.tools ?? []
  const bt = b.tools ?? []
  return at.length === bt.length && at.every((tool, i) => JSON.stringify(tool) === JSON.stringify(bt[i]))
}

/** SPEC 7: the canonical header of the latest `request/header`, else `from`. */
export function foldRequestHeader(events, from) {
  let state = from
  for (const event of events) {
    if (event.type === 'request/header') state = canonicalHeader(event.data.header)
  }
  return state
}
