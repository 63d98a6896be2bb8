'use strict'
// Sizes and previews of message content, for the reports.

/** Characters of a content block's text (tool results: their inner text). */
function blockChars(block) {
  if (block === null || typeof block !== 'object') return 0
  switch (block.type) {
    case 'text':
    case 'reasoning':
      return typeof block.text === 'string' ? block.text.length : 0
    case 'tool-call':
      return (typeof block.arguments === 'string' ? block.arguments.length : 0) + String(block.name ?? '').length
    case 'tool-result':
      return contentChars(block.content)
    default:
      return JSON.stringify(block).length
  }
}

function contentChars(content) {
  if (!Array.isArray(content)) return 0
  let n = 0
  for (const block of content) n += blockChars(block)
  return n
}

/** The first text of a message's content, for previews. */
function firstText(content) {
  if (!Array.isArray(content)) return ''
  for (const block of content) {
    if (block?.type === 'text' && typeof block.text === 'string') return block.text
    if (block?.type === 'tool-result') return firstText(block.content)
    if (block?.type === 'tool-call') return `${block.name}(${block.arguments})`
  }
  return ''
}

module.exports = { contentChars, firstText }
