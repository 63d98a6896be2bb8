// Loading the published logs (../shared/fixtures-published/logs) with a package
// that has the published line's API, as docs/PUBLISHED.md section 16 describes:
// fill the {{cwd}} and {{sessionId}} templates, decode each line after the
// header with the package's decodeStorageRecord (packed chunk rows expand to
// assistant/chunk events), then Session.fromRestore(header.id, events, header
// without its "type"). Shared by scripts/published-fixture-expect.mjs and
// __test__/published-16-fixtures.test.ts, so both sides load a log the same way.
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'

/** The values the templates are filled with (the header check wants an absolute cwd). */
export const TEMPLATE_VALUES = { cwd: '/tmp/dsh-published-fixture-cwd', sessionId: 'published-fixture-session' }

/** Every *.jsonl under `logsDir`, as paths relative to it, sorted. */
export function listLogs(logsDir) {
  const out = []
  ;(function walk(dir) {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name)
      if (e.isDirectory()) walk(p)
      else if (e.name.endsWith('.jsonl')) out.push(relative(logsDir, p))
    }
  })(logsDir)
  return out.sort()
}

/** The log's text with the two templates filled. */
export function fillTemplates(text) {
  return text.replaceAll('{{cwd}}', TEMPLATE_VALUES.cwd).replaceAll('{{sessionId}}', TEMPLATE_VALUES.sessionId)
}

/**
 * Loads one log with `pkg` (the module namespace of the package's root).
 * @returns `{ session, decoded }` (decoded: how many events the lines gave; a
 *   `session/end-seed` the construction appends comes after them, with the
 *   clock's time) or `{ error }` (the thrown value), plus the parsed header.
 */
export function loadLog(pkg, text) {
  const lines = fillTemplates(text).split('\n').filter(l => l.trim() !== '')
  const { type: _type, ...header } = JSON.parse(lines[0])
  try {
    const events = lines.slice(1).flatMap(l => pkg.decodeStorageRecord(JSON.parse(l)))
    return { header, decoded: events.length, session: pkg.Session.fromRestore(header.id, events, header) }
  } catch (error) {
    return { header, error }
  }
}

/** JSON-safe summary of a load: what fixture-expect.json holds per log. */
export function summarize(loaded) {
  if (loaded.error !== undefined) return { ok: false, error: String(loaded.error?.message ?? loaded.error) }
  const s = loaded.session
  return {
    ok: true,
    messages: s.deriveMessages(),
    requestHeader: s.requestHeader() ?? null,
    requestContext: s.requestContext() ?? null,
    header: s.header,
    events: s.events.length,
    firstLiveSeq: s.firstLiveSeq,
    surfaceNodes: [...s.surface.nodes],
  }
}

export function readLog(logsDir, rel) {
  return readFileSync(join(logsDir, rel), 'utf8')
}
