// An ES module plugin that imports the package (its ESM entry), as a
// consumer's plugin does; host.cjs loads it with require().
import SessionStore, { Session } from 'dsh-session-native'

export { SessionStore, Session }

/** A session created through the service the host installed. */
export function start(ctx, id) {
  const session = ctx.sessions.create(id)
  session.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })
  session.append('user/message', { content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }, { surfaceOp: 'append' })
  return session
}
