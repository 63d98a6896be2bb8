#!/usr/bin/env node
'use strict'
// dsh-session: look inside a stored session log, check it, repair it, convert
// it. The commands live in lib/cli/ (one module each); docs/CLI.md is the
// reference.

require('../lib/cli/main.js').run(process.argv.slice(2))
