// Wraps what Prettier leaves over the line budget: comments (block, line and trailing) and string/template literals
// (split into concatenations at a space, in parentheses that Prettier drops where they are not needed). Run Prettier
// after it. Usage: node tools/wrap-long-lines.mjs [--max 120] FILE.ts...
import ts from 'typescript';
import { readFileSync, writeFileSync } from 'node:fs';

const args = process.argv.slice(2);
const maxAt = args.indexOf('--max');
const MAX = maxAt >= 0 ? Number(args.splice(maxAt, 2)[1]) : 120;

/** Words of `text` in lines of at most `width` (a word longer than width stays whole). */
function wrapWords(text, width) {
  const lines = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

function wrapCommentLine(line) {
  const block = /^(\s*)\/\*\*\s?(.*?)\s*\*\/\s*$/.exec(line);
  if (block) {
    const [, indent, text] = block;
    return [`${indent}/**`, ...wrapWords(text, MAX - indent.length - 3).map(w => `${indent} * ${w}`), `${indent} */`];
  }
  const star = /^(\s*)\*( ?)(\s*)(.*)$/.exec(line);
  if (star && !line.trimStart().startsWith('*/')) {
    const [, indent, , extra, text] = star;
    const prefix = `${indent}* ${extra}`;
    return wrapWords(text, MAX - prefix.length).map(w => `${prefix}${w}`);
  }
  const slash = /^(\s*)\/\/( ?)(\s*)(.*)$/.exec(line);
  if (slash) {
    const [, indent, , extra, text] = slash;
    const prefix = `${indent}// ${extra}`;
    return wrapWords(text, MAX - prefix.length).map(w => `${prefix}${w}`);
  }
  return undefined;
}

/** Full-line comments, and trailing `//` comments moved above their line. */
function wrapComments(source) {
  const out = [];
  for (const line of source.split('\n')) {
    if (line.length <= MAX) {
      out.push(line);
      continue;
    }
    const wrapped = wrapCommentLine(line);
    if (wrapped) {
      out.push(...wrapped);
      continue;
    }
    const trailing = trailingComment(line);
    if (trailing !== undefined) {
      const indent = /^\s*/.exec(line)[0];
      const text = line.slice(trailing).replace(/^\/\/\s?/, '');
      out.push(...wrapWords(text, MAX - indent.length - 3).map(w => `${indent}// ${w}`));
      out.push(line.slice(0, trailing).trimEnd());
      continue;
    }
    out.push(line);
  }
  return out.join('\n');
}

/** Where a trailing `//` comment starts in a line of code, found by TypeScript's scanner; undefined if none. */
function trailingComment(line) {
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, line);
  let sawCode = false;
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (kind === ts.SyntaxKind.SingleLineCommentTrivia) return sawCode ? scanner.getTokenStart() : undefined;
    if (kind !== ts.SyntaxKind.WhitespaceTrivia && kind !== ts.SyntaxKind.MultiLineCommentTrivia) sawCode = true;
  }
  return undefined;
}

const SPLITTABLE_PARENT_REFUSED = new Set([
  ts.SyntaxKind.LiteralType,
  ts.SyntaxKind.ImportDeclaration,
  ts.SyntaxKind.ExportDeclaration,
  ts.SyntaxKind.ExternalModuleReference,
  ts.SyntaxKind.EnumMember,
  ts.SyntaxKind.CaseClause,
  ts.SyntaxKind.ImportType,
  ts.SyntaxKind.TaggedTemplateExpression,
]);

/** Positions (in `text`) of spaces inside literal text where a split may go: [offset of the space]. */
function literalSpaces(node, sf) {
  const spaces = [];
  const add = (start, text, skipStart, skipEnd) => {
    for (let i = skipStart; i < text.length - skipEnd; i++) if (text[i] === ' ') spaces.push(start + i + 1);
  };
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
    const raw = node.getText(sf);
    if (/\\\n/.test(raw)) return [];
    add(node.getStart(sf), raw, 1, 1);
  } else if (ts.isTemplateExpression(node)) {
    const head = node.head.getText(sf);
    add(node.head.getStart(sf), head, 1, 2);
    for (const span of node.templateSpans) {
      const lit = span.literal.getText(sf);
      add(span.literal.getStart(sf), lit, 1, ts.isTemplateTail(span.literal) ? 1 : 2);
    }
  }
  return spaces;
}

/** Splits long literals into concatenations; returns the new text, or the same when nothing changed. */
function splitLiterals(source, file) {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const lineStarts = sf.getLineStarts();
  const lineEnd = l => (l + 1 < lineStarts.length ? lineStarts[l + 1] - 1 : source.length);
  const edits = [];
  const visit = node => {
    const literal = ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node);
    if (literal && !SPLITTABLE_PARENT_REFUSED.has(node.parent.kind) && !isPropertyName(node)) {
      const start = node.getStart(sf);
      const line = sf.getLineAndCharacterOfPosition(start).line;
      const endLine = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      if (line === endLine && lineEnd(line) - lineStarts[line] > MAX) {
        const quote = ts.isStringLiteral(node) ? source[start] : '`';
        const cuts = chooseCuts(literalSpaces(node, sf), lineStarts[line], start, node.getEnd());
        if (cuts.length > 0) edits.push({ start, end: node.getEnd(), cuts, quote });
        return;
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  let out = source;
  for (const { start, end, cuts, quote } of edits.sort((a, b) => b.start - a.start)) {
    let text = out.slice(start, end);
    for (const cut of [...cuts].reverse()) {
      const at = cut - start;
      text = `${text.slice(0, at)}${quote} +\n${quote}${text.slice(at)}`;
    }
    out = `${out.slice(0, start)}(${text})${out.slice(end)}`;
  }
  return out;
}

function isPropertyName(node) {
  const p = node.parent;
  return (ts.isPropertyAssignment(p) || ts.isPropertySignature(p) || ts.isMethodDeclaration(p)) && p.name === node;
}

/** Cut points so each piece (after Prettier's indentation, ~ 12 columns) fits; at spaces only. */
function chooseCuts(spaces, lineStart, start, end) {
  const budget = MAX - 14;
  const cuts = [];
  let from = start;
  let firstBudget = Math.max(30, MAX - (start - lineStart) - 4);
  while (end - from > (cuts.length === 0 ? firstBudget : budget)) {
    const limit = from + (cuts.length === 0 ? firstBudget : budget);
    const candidates = spaces.filter(s => s > from + 10 && s <= limit);
    if (candidates.length === 0) break;
    const cut = candidates[candidates.length - 1];
    cuts.push(cut);
    from = cut;
    firstBudget = budget;
  }
  return cuts;
}

for (const file of args) {
  const before = readFileSync(file, 'utf8');
  const after = splitLiterals(wrapComments(before), file);
  if (after !== before) writeFileSync(file, after);
}
