// The published line's SessionStore (PUB 12): lib/service.js's store (the
// entries, delivery, the seam and the fork's checks are one for both lines)
// given what this line does differently: `prepare` with `seedSource:
// 'persistence'` and the new `meta` fields (PUB 12.3), `flush` resolving
// whether any listener took part (PUB 12.4), the typert lookup (PUB 12.2),
// and a fork's seed, whose boundary may be any event outside an open turn
// (PUB 12.5; the rule's home is the native `forkEnd`).

import { defineSessionStore, forkEnd, SessionForkError } from './native.js'
import { Session, attachSeam } from './session.js'

const META_KEYS = ['cwd', 'parentSession', 'seedLength', 'origin', 'delegationDepth', 'agentPreset']

/** The turn that `events[0..=at]` end inside (its `data.turn` as a number), or null: what the fork rule reads. */
function openTurnIn(events, at) {
  for (let i = at; i >= 0; i--) {
    const type = events[i].type
    if (type === 'turn/end') return null
    if (type === 'turn/start') {
      const turn = events[i].data?.turn
      return typeof turn === 'number' ? turn : NaN
    }
  }
  return null
}

export const SessionStore = defineSessionStore({
  name: 'dsh-session-native-published',
  isSession: (session) => session instanceof Session,
  attach: attachSeam,
  flushed: (listeners) => listeners > 0,
  constructed(store, ctx) {
    ctx.inject(['typert'], (typeCtx) => {
      typeCtx.typert.lookups.register('session', {
        parameter: 'session',
        wire: 'sessionId',
        hostTypeSymbol: '@deepseek-ai/dsh-session#Session',
        wireTypeSymbol: '@deepseek-ai/dsh-session/types#SessionId',
        resolve: (sessionId) => store.get(sessionId),
      })
    })
  },
  prepare(sessionId, options) {
    if (options?.seedSource === 'persistence') return Session.fromRestore(sessionId, options.seed, options.meta)
    const meta = options?.meta
    const header = { version: 0, id: sessionId, createdAt: meta?.createdAt ?? Date.now() }
    for (const key of META_KEYS) if (meta?.[key] !== undefined) header[key] = meta[key]
    return Session.create(sessionId, options?.seed, header)
  },
  forkOptions(id, boundary, parent) {
    const events = parent.events
    const end = forkEnd(id, boundary, events.length, (i) => events[i].seq, undefined, true, (at) => openTurnIn(events, at))
    const seed = events.slice(0, end)
    const cwd = parent.header.cwd
    return { seed, meta: { ...(cwd === undefined ? {} : { cwd }), parentSession: parent.id, seedLength: seed.length } }
  },
})

export { SessionForkError }
