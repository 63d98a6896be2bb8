'use strict'
// The command line: the commands, their options and help texts, parsed with
// node:util's parseArgs.

const { parseArgs: parse } = require('node:util')
const { CliError, CODES } = require('./errors.js')
const { PROGRAM } = require('./output.js')

const ADDRESSES = `A <log> is a file (JSONL or a SQLite database: the content decides, not the
name), sqlite:<path>#<session-id> for one session of a SQLite database,
postgres://user@host:port/db[?schema=name]#<session-id> for one session of a
PostgreSQL store (the id percent-encoded), or - for standard input.`

const USAGE = `usage: ${PROGRAM} <command> [options] <log>

Look inside, check, repair and convert dsh session logs (format v0).

${ADDRESSES}

commands:
  inspect <log>              a readable report of what the log holds
  check <log>                exit 0 if it loads as stored, 2 if only after repair, 3 if in use, 1 if not at all
  derive <log>               the derived model messages, as JSON
  surface <log>              the surface nodes and the replacement history
  repair <log>               make the load repair durable (what a store does on load)
  convert <from> <to>        copy a session between JSONL and SQLite
  list <dir | database>      the headers of the stored sessions

options (every command):
  --json                     machine-readable output; errors as {"error":{"code","message"}} on stderr
  -h, --help                 help for a command
  -V, --version              the package version

Exit status 1 is a failure, 64 a usage error (docs/CLI.md).
Run '${PROGRAM} <command> --help' for a command's options.`

/** Each command: its positional arguments, its boolean options, its help. */
const COMMANDS = {
  inspect: {
    args: ['log'],
    flags: ['json'],
    help: `usage: ${PROGRAM} inspect <log> [--json]

A report of what the log holds: header, events per type, turns and steps,
tool calls, models and token usage, the surface and what each replacement
(compaction) shadowed, the derived messages by role with their sizes,
request-header changes, whether the log needs repair, and the SPEC 9
invariant checks. Read-only. Long logs show a progress bar on stderr when
it is a terminal.

A log that cannot be loaded is reported up to its defect (the events before
it), then the reason; the exit status is then 1.

${ADDRESSES}`,
  },
  check: {
    args: ['log'],
    flags: ['json', 'invariants'],
    help: `usage: ${PROGRAM} check <log> [--invariants] [--json]

Whether the log loads. Read-only.

exit status:
  0  it loads as stored
  2  it loads only after repair (a torn tail dropped, an interrupted turn closed)
  3  it is in use: a store holds its write lease, so its open turn is being
     written, not cut by a crash (nothing to repair now)
  1  it cannot be loaded, or (with --invariants) it breaks the SPEC 9 checks;
     the reason is printed with its line or seq
  64 a usage error

options:
  --invariants   also run the SPEC 9 development checks over the loaded log`,
  },
  derive: {
    args: ['log'],
    flags: ['json', 'repaired'],
    help: `usage: ${PROGRAM} derive <log> [--repaired]

The messages the log derives (what the model sees), as a JSON array on
stdout. The output is JSON with or without --json.

options:
  --repaired   derive the log as a store load returns it (with the closers
               of an interrupted turn); by default, the events as stored`,
  },
  surface: {
    args: ['log'],
    flags: ['json', 'repaired'],
    help: `usage: ${PROGRAM} surface <log> [--repaired] [--json]

The surface (the event seqs that produce model messages, in order) with each
node's type and size, and the replacement history: which nodes each
replace (a compaction, a trim) shadowed.

options:
  --repaired   the log as a store load returns it (with the closers)
  --json       { nodes, replaceGeneration, replacements } as foldSurface gives them`,
  },
  repair: {
    args: ['log'],
    flags: ['json', 'dry-run'],
    help: `usage: ${PROGRAM} repair <log> [--dry-run] [--json]

Apply the load repair durably, as a store does when it loads the session:
drop a torn tail after the last turn/end, and close an interrupted final
turn (a result for each pending tool call, step/end, turn/end). Corruption
before the last turn/end cannot be repaired and is reported. The log must
be a file (not -).

options:
  --dry-run   say what would change, change nothing`,
  },
  convert: {
    args: ['from', 'to'],
    flags: ['json'],
    help: `usage: ${PROGRAM} convert <from> <to> [--json]

Copy a session between a JSONL file and a SQLite database. <from> is any
<log> (- reads standard input). <to> is sqlite:<path>[#<id>] (the id, when
given, must be the session's), postgres://…/db[?schema=name][#<id>] (a
PostgreSQL store), an existing SQLite database, a new file (a
SQLite database when it is named *.db, *.sqlite or *.sqlite3, JSONL
otherwise), or - (JSONL on standard output). The session is copied as a
store load returns it; the source is not changed. The destination must not
hold the session yet (a JSONL file must not exist).`,
  },
  list: {
    args: ['store'],
    flags: ['json'],
    help: `usage: ${PROGRAM} list <dir | database | sqlite:path | postgres://…/db> [--json]

The headers of the sessions stored under a JSONL store root (its cwd-*/ and
_no-cwd/ folders, the .jsonl files and the SQLite databases directly in the
folder) or in a SQLite database. Reads headers only. A log whose header
cannot be read is reported as a warning on stderr.`,
  },
}

/**
 * `{ help }`, `{ version: true }` or `{ command, flags, positionals }`;
 * wrong arguments are a CliError (USAGE).
 */
function parseArgs(argv) {
  if (argv.length === 0) throw new CliError(`no command given\n${USAGE}`, CODES.USAGE)
  const first = argv[0]
  if (first === '-h' || first === '--help' || first === 'help') {
    const topic = argv[1]
    return { help: topic !== undefined && Object.hasOwn(COMMANDS, topic) ? COMMANDS[topic].help : USAGE }
  }
  if (first === '--version' || first === '-V') return { version: true }
  if (!Object.hasOwn(COMMANDS, first)) {
    throw new CliError(`unknown command "${first}" (commands: ${Object.keys(COMMANDS).join(', ')}; see ${PROGRAM} --help)`, CODES.USAGE)
  }
  const spec = COMMANDS[first]
  const options = { help: { type: 'boolean', short: 'h' } }
  for (const flag of spec.flags) options[flag] = { type: 'boolean' }
  let parsed
  try {
    parsed = parse({ args: argv.slice(1), options, allowPositionals: true, strict: true })
  } catch (error) {
    const option = /'(-[^']*)'/.exec(String(error.message))?.[1]?.replace(/^(--?[^=\s]+).*$/, '$1')
    const what = error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? `unknown option ${option ?? ''}` : `bad option ${option ?? ''}`
    throw new CliError(`${what.trimEnd()} for ${first} (see ${PROGRAM} ${first} --help)`, CODES.USAGE)
  }
  const { help, ...flags } = parsed.values
  if (help) return { help: spec.help }
  const positionals = parsed.positionals
  if (positionals.length !== spec.args.length) {
    const usage = spec.help.split('\n')[0]
    throw new CliError(`${first} takes ${spec.args.map((a) => `<${a}>`).join(' ')} (${usage})`, CODES.USAGE)
  }
  return { command: first, flags, positionals }
}

module.exports = { COMMANDS, USAGE, parseArgs }
