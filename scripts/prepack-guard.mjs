#!/usr/bin/env node
// prepack: refuse to pack a checkout whose addon is not built (the tarball
// would hold no napi-loader.js and no binary, and fail on require).
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { hostBinary, isBuilt } from './platform.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
if (!isBuilt(root)) {
  console.error(`dsh-session-native: refusing to pack: the addon is not built (no ${path.basename(hostBinary(root))} or napi-loader.js). Run \`npm run package\` (or \`npm run build\` first).`)
  process.exit(1)
}
