// The one native addon, shared with dsh-session-native: in an installed
// package a copy of the root's loader sits in ../native/ (scripts/package.mjs
// writes it); in this repository the root's binding.js is used. The errors it
// throws are the root's `SessionError`s (a `code` beside the message).
import { createRequire } from 'node:module'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const packed = fileURLToPath(new URL('../native/binding.js', import.meta.url))
const root = existsSync(packed) ? '../native/' : '../../'
const binding = require(`${root}binding.js`)
const errors = require(`${root}lib/errors.js`)
/** The store service's shared part (lib/service.js: one for both lines). */
export const { defineSessionStore, SessionForkError } = require(`${root}lib/service.js`)
/** The JS side of the native fork rule (one for both lines). */
export const { forkEnd } = require(`${root}lib/core/fork-end.js`)

export const { NativeSession } = binding
export { binding }
export const { SessionError, fail } = errors
