'use strict'
// Numbers, sizes, times and tables as the reports print them.

function formatInt(n) {
  return Number(n).toLocaleString('en-US')
}

function plural(n, unit, many = `${unit}s`) {
  return `${formatInt(n)} ${n === 1 ? unit : many}`
}

function formatBytes(n) {
  if (n < 1024) return `${n} B`
  const units = ['KiB', 'MiB', 'GiB']
  let v = n / 1024
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`
}

function formatTime(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '-'
  const d = new Date(ms)
  if (Number.isNaN(d.getTime())) return String(ms)
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC')
}

/** `start → end`, the end without its date when both fall on the same day. */
function formatSpan(start, end) {
  const a = formatTime(start)
  const b = formatTime(end)
  if (a.slice(0, 10) === b.slice(0, 10) && a.length === b.length) return `${a.replace(' UTC', '')} → ${b.slice(11)}`
  return `${a} → ${b}`
}

function formatDuration(ms) {
  if (!(ms >= 0)) return '-'
  if (ms < 1000) return `${ms} ms`
  const s = ms / 1000
  if (s < 60) return `${s.toFixed(1)} s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m} min ${Math.round(s - m * 60)} s`
  const h = Math.floor(m / 60)
  return `${h} h ${m - h * 60} min`
}

/** Seqs as compact ranges: `3-7, 9, 12-14`. */
function ranges(seqs, limit = 12) {
  const parts = []
  let i = 0
  while (i < seqs.length) {
    let j = i
    while (j + 1 < seqs.length && seqs[j + 1] === seqs[j] + 1) j++
    parts.push(i === j ? `${seqs[i]}` : `${seqs[i]}-${seqs[j]}`)
    i = j + 1
  }
  if (parts.length <= limit) return parts.join(', ')
  return `${parts.slice(0, limit).join(', ')}, … (${parts.length - limit} more ranges)`
}

/** Rows as aligned columns; `align[i]` is 'r' for right-aligned numbers. */
function table(rows, align = [], indent = '  ') {
  const widths = []
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, String(cell).length)
    })
  }
  return rows
    .map((row) => indent + row
      .map((cell, i) => {
        const s = String(cell)
        if (i === row.length - 1 && align[i] !== 'r') return s
        return align[i] === 'r' ? s.padStart(widths[i]) : s.padEnd(widths[i])
      })
      .join('  ')
      .trimEnd())
    .join('\n')
}

/** A labelled section line: `label      text`. */
function field(label, text) {
  return `${label.padEnd(11)}${text}`
}

function preview(text, width = 60) {
  const flat = String(text).replace(/\s+/g, ' ').trim()
  return flat.length > width ? `${flat.slice(0, width - 1)}…` : flat
}

function countInto(map, key, n = 1) {
  map.set(key, (map.get(key) ?? 0) + n)
}

function sortedCounts(map) {
  return [...map.entries()].sort((a, b) => b[1] - a[1] || String(a[0]).localeCompare(String(b[0])))
}

module.exports = { formatInt, plural, formatBytes, formatTime, formatSpan, formatDuration, ranges, table, field, preview, countInto, sortedCounts }
