/**
 * Where in a JSON text `JSON.parse` stopped, as a person finds it in an editor: line and column (1-based) and that
 * line. V8 says `… in JSON at position 49` (Node 20) or `… (line 5 column 3)` (newer); a message with neither gives
 * undefined.
 *
 * @example
 * const text = '{\n  "a": 1\n  "b": 2\n}'; // JSON.parse(text) throws the error below
 * jsonErrorPlace(text, new SyntaxError("Expected ',' or '}' after property value in JSON at position 13"))
 * // 'line 3, column 3: `  "b": 2`'
 */
export function jsonErrorPlace(text: string, err: unknown): string | undefined {
  const message = err instanceof Error ? err.message : String(err);
  const byLine = /\(line (\d+) column (\d+)\)/.exec(message);
  let line: number;
  let column: number;
  if (byLine) {
    line = Number(byLine[1]);
    column = Number(byLine[2]);
  } else {
    const at = /at position (\d+)/.exec(message);
    if (!at) return undefined;
    const before = text.slice(0, Number(at[1]));
    line = before.split('\n').length;
    column = before.length - before.lastIndexOf('\n');
  }
  const shown = (text.split('\n')[line - 1] ?? '').replace(/\r$/, '');
  return `line ${line}, column ${column}: \`${shown.length > 80 ? `${shown.slice(0, 77)}...` : shown}\``;
}
