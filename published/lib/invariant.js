// The `./invariant` companion of the published line (PUB 10, 13.3): the
// session log's relational checks as a Cordis plugin over the peer
// `@deepseek-ai/dsh-invariants` registry.
//
// The registry hands the installer its `fail(message)`, which throws the
// peer's `InvariantError` (`code 'INVARIANT'`, `packageName`, and the message
// `invariant violated by "<package>": <message>`); so this module needs no
// import at run time. It needs the `invariants` service to register and the
// `sessions` service once installed.
//
// Each session has a trace (the state the rules read). A candidate is checked
// against it before commit, in a global `internal/dispatch` listener for
// `session/event`: a failure throws there, which vetoes the append and leaves
// the log and the trace as they were. An accepted candidate's change to the
// trace is only staged (keyed by the event object) and applied by the
// post-commit `session/event` listener, so a later veto by someone else
// changes nothing either.

const PACKAGE = '@deepseek-ai/dsh-session'
const NOT_STARTED = 'TOOL_NOT_STARTED'

export const name = 'session-invariant'
export const inject = ['invariants']

/** The types whose events name a turn and step that must be the open ones. */
const STEP_SCOPED = new Set(['step/end', 'assistant/chunk', 'assistant/message', 'tool/call'])
/** The types that need an open turn, and nothing more. */
const TURN_ENCLOSED = new Set(['todo/write', 'request/header', 'request/context'])

/** A trace before any event. */
function emptyTrace() {
  return { lastSeq: -1, openTurn: null, openStep: null, nextTurn: 1, nextStep: 1, pending: new Set() }
}

/**
 * Check `event` against `trace` without changing it. Returns the change the
 * event makes once committed: `{ lastSeq, openTurn, openStep, nextTurn,
 * nextStep, calls }`, where `calls` is `null` (pending calls unchanged), or
 * `{ op: 'add' | 'delete', callId }`, or `{ op: 'clear' }`. A broken rule
 * calls `fail` (which throws).
 */
function check(trace, event, fail) {
  const { seq, type } = event
  if (seq <= trace.lastSeq) fail(`seq must strictly increase: saw ${seq} after ${trace.lastSeq}`)
  const next = {
    lastSeq: seq,
    openTurn: trace.openTurn,
    openStep: trace.openStep,
    nextTurn: trace.nextTurn,
    nextStep: trace.nextStep,
    calls: null,
  }
  const inOpenStep = (label, turn, step) => {
    if (turn !== trace.openTurn || step !== trace.openStep) {
      fail(`${label} names turn ${turn}/step ${step} but open is turn ${trace.openTurn}/step ${trace.openStep}`)
    }
  }

  if (type === 'turn/start') {
    const turn = event.data.turn
    if (trace.openTurn !== null) fail(`turn/start ${turn} while turn ${trace.openTurn} is still open`)
    if (turn !== trace.nextTurn) fail(`turn/start expected turn ${trace.nextTurn}, got ${turn}`)
    next.openTurn = turn
    next.nextStep = 1
  } else if (type === 'turn/end') {
    const turn = event.data.turn
    if (turn !== trace.openTurn) fail(`turn/end ${turn} does not match open turn ${trace.openTurn}`)
    if (trace.openStep !== null) fail(`turn/end ${turn} while step ${trace.openStep} is still open`)
    next.openTurn = null
    next.nextTurn = trace.nextTurn + 1
  } else if (type === 'step/start') {
    const { turn, step } = event.data
    if (turn !== trace.openTurn) fail(`step/start in turn ${turn} but open turn is ${trace.openTurn}`)
    if (trace.openStep !== null) fail(`step/start ${step} while step ${trace.openStep} is still open`)
    if (step !== trace.nextStep) fail(`step/start expected step ${trace.nextStep} in turn ${turn}, got ${step}`)
    next.openStep = step
  } else if (STEP_SCOPED.has(type)) {
    inOpenStep(type, event.data.turn, event.data.step)
    if (type === 'step/end') {
      next.openStep = null
      next.nextStep = trace.nextStep + 1
      next.calls = { op: 'clear' }
    } else if (type === 'tool/call') {
      next.calls = { op: 'add', callId: event.data.callId }
    }
  } else if (type === 'tool/result') {
    if (event.surfaceOp === 'append') {
      const data = event.data
      inOpenStep(type, data.turn, data.step)
      const callId = data.message.source.callId
      // A not-started closer (PUB 9) answers a call that was never logged.
      const notStarted = data.message.content[0].isError === true && data.error?.code === NOT_STARTED
      if (!notStarted && !trace.pending.has(callId)) {
        fail(`tool/result for ${callId} with no prior tool/call in this step`)
      }
      next.calls = { op: 'delete', callId }
    } else if (trace.openTurn === null) {
      // A replacement rewrites an earlier result: it only needs an open turn.
      fail('tool/result surface replacement appended outside any open turn')
    }
  } else if (TURN_ENCLOSED.has(type)) {
    if (trace.openTurn === null) {
      fail(`${type} appended outside any open turn (core execution events must be turn-enclosed)`)
    }
  }
  // Anything else (user/message, session/end-seed, plugin-owned types) is unconstrained.
  return next
}

/** Make a checked change part of the trace. */
function commit(trace, next) {
  trace.lastSeq = next.lastSeq
  trace.openTurn = next.openTurn
  trace.openStep = next.openStep
  trace.nextTurn = next.nextTurn
  trace.nextStep = next.nextStep
  const calls = next.calls
  if (calls === null) return
  if (calls.op === 'add') trace.pending.add(calls.callId)
  else if (calls.op === 'delete') trace.pending.delete(calls.callId)
  else trace.pending.clear()
}

/** The installer the registry runs in its child fiber, with `sessions` injected. */
function install(ctx, fail) {
  const traces = new WeakMap()
  const staged = new WeakMap()

  // A fresh trace replaying the session's events; a seed that breaks a rule throws.
  const seed = (session) => {
    const trace = emptyTrace()
    traces.set(session, trace)
    for (const event of session.events) commit(trace, check(trace, event, fail))
    return trace
  }

  for (const session of ctx.sessions.list()) seed(session)
  ctx.on('session/created', (session) => { seed(session) }, { global: true })

  // Before commit: check the candidate; a throw here vetoes the append.
  ctx.on('internal/dispatch', (_mode, eventName, args) => {
    if (eventName !== 'session/event') return
    const session = args[0]
    const event = args[1]
    const trace = traces.get(session) ?? seed(session)
    staged.set(event, { session, trace, next: check(trace, event, fail) })
  }, { global: true })

  // After commit: apply what the pre-commit check staged for this very event.
  ctx.on('session/event', (session, event) => {
    const entry = staged.get(event)
    if (entry === undefined || entry.session !== session) {
      fail('session/event reached publication without matching pre-commit validation')
    }
    staged.delete(event)
    commit(entry.trace, entry.next)
  }, { global: true })
}
install.inject = ['sessions']

/** Register the companion; resolves to the registration's disposer once installed. */
export const apply = (ctx) => Promise.resolve(ctx.invariants.register(PACKAGE, install))
