#!/usr/bin/env node
// prepack at the repository root: refuse. `npm pack` or `npm publish` here
// would pack a package with no optionalDependencies on the platform packages
// (they are written only into the staged copy) and, at best, one local
// binary that the package does not list. The release path is
// `npm run package` (scripts/package.mjs), which stages the main package and
// a platform package and packs them with --ignore-scripts; the release
// workflow publishes those tarballs. docs/INSTALL.md tells the whole story.
console.error(
  'dsh-session-native: refusing to pack the repository root: its package would have no platform binary dependencies. '
    + 'Run `npm run package` (tarballs in dist/: the package and this platform\'s binary; '
    + '`npm run package -- --target <rust triple>` for another platform), then install or publish those tarballs.',
)
process.exit(1)
