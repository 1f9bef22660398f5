// The event lines every driver of the fail-over matrix prints (package
// interop's Event): one JSON object a line on stdout.
export function emit (ev, partitions = [], msg = undefined) {
  const line = { t: Date.now(), ev, partitions: [...partitions].sort((a, b) => a - b) }
  if (msg) line.msg = msg
  process.stdout.write(JSON.stringify(line) + '\n')
}
