// dsh-session-native-published: a drop-in for @deepseek-ai/dsh-session
// 0.1.1-rc.2 (docs/PUBLISHED.md; PUB 13 lists these exports). The session
// and its rules run on the native core in its `published` vocabulary; the
// plain-JS modules beside this file are the ones `./types` and `./surface`
// must serve without the addon.

import { binding } from './native.js'
import { deepFreezeInPlace } from './json.js'
import { SessionStore } from './service.js'

export { SessionId, SESSION_FORMAT_VERSION } from './types.js'
export { Session } from './session.js'
export { SessionStore, SessionForkError } from './service.js'
export { SessionPreparation } from './preparation.js'
export { isJsonValue, snapshotJsonValue } from './json.js'
export { TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN } from './constants.js'
export { decodeStorageRecord, packChunkRuns } from './chunk-rows.js'
export {
  deriveEventMessage, foldSurface, isAppendSurfaceEvent, isReplacementSurfaceEvent, isSurfaceEvent, isSurfaceEligibleType,
} from './surface.js'
export { canonicalHeader, foldRequestHeader, headerEquals } from './request-header.js'
export { KNOWN_SESSION_EVENT_TYPES } from './known-event-types.js'

/** The message an event's type carries, or undefined (PUB 14.1: what `adoptSessionEvent` freezes). */
function messageOf(event) {
  switch (event.type) {
    case 'user/message': return event.data
    case 'assistant/message':
    case 'tool/result': return event.data.message
    default: return undefined
  }
}

/** PUB 14.1: check the message shape (PUB 4.2), freeze only the message, in place; the same object. */
export function adoptSessionEvent(event) {
  if (event.type === 'user/message' || event.type === 'assistant/message' || event.type === 'tool/result') {
    binding.checkMessageShape(JSON.stringify(event), `session event at seq ${event.seq}`)
    deepFreezeInPlace(messageOf(event))
  }
  return event
}

/** PUB 14.1: `adoptSessionEvent` of a detached copy (`structuredClone`). */
export function snapshotSessionEvent(event) {
  return adoptSessionEvent(structuredClone(event))
}

/** PUB 9: the closers of an interrupted turn: plain objects whose messages are frozen. */
export function interruptedTurnClosers(events) {
  const closers = JSON.parse(binding.interruptedTurnClosersJson(JSON.stringify(events), 'published'))
  for (const closer of closers) if (closer.type === 'tool/result') deepFreezeInPlace(closer.data.message)
  return closers
}

export default SessionStore
