// PUB 15: one unpublished session and the release to run once on dispose.
// It does not check that the session is unpublished. The constructor is
// private in the types; JavaScript callers use `SessionPreparation.create`.

export class SessionPreparation {
  #options
  #released = false

  constructor(session, options) {
    this.session = session
    this.#options = options ?? {}
  }

  static create(session, options) {
    return new SessionPreparation(session, options ?? {})
  }

  [Symbol.dispose]() {
    if (this.#released) return
    this.#released = true
    this.#options.release?.()
  }
}
