// Each comm hook declares the fields of commHookOptions it reads: another hook's option given to it is refused
// naming the hook that reads it and its flag, `--comm-hook auto` keeps only the picked hook's, and a registered
// hook's own options become known fields and flags.
import tap from 'tap';
import { optionsForPickedHook, resolveCommHook } from '../src/pipeline/resolve-comm-hook.js';
import { registerCommHook } from '../src/pipeline/comm-hooks.js';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';
import { trainFlags } from '../src/cli/train-flags.js';
import { helpText } from '../src/cli/help-text.js';

tap.test("a built-in hook refuses another hook's option, naming its flag", async t => {
  await t.rejects(resolveCommHook('fp16', { rank: 2 }), {
    code: 'BAD_CONFIG',
    message:
      "config.commHookOptions.rank: applies to the powersgd hook only, and this run's hook is fp16 " +
      '(it has errorFeedback alone); leave out --powersgd-rank, or give --comm-hook powersgd',
  });
  await t.rejects(resolveCommHook('bf16', { warmStart: false }), { message: /leave out --no-warm-start/ });
  const powersgd = await resolveCommHook('powersgd', { rank: 2, errorFeedback: false });
  t.match(powersgd?.options, { rank: 2, errorFeedback: false, startStep: 10 }, "powersgd's own, over the defaults");
  await t.rejects(resolveCommHook('powersgd', { rank: 0 }), {
    message: /commHookOptions.rank: must be an integer >= 1/,
  });
});

tap.test('auto keeps the options of the hook it picked', async t => {
  t.same(optionsForPickedHook('fp16', { rank: 2, errorFeedback: false }), { errorFeedback: false });
  t.equal(optionsForPickedHook('fp16', { rank: 2 }), undefined);
  t.same(optionsForPickedHook('powersgd', { rank: 2 }), { rank: 2 });
});

tap.test("a registered hook's options are known fields, flags and in --help", async t => {
  registerCommHook({
    name: 'options-test-hook',
    description: 'a hook with an option of its own',
    options: {
      level: {
        kind: 'integer',
        group: 'comm hook',
        hosts: 'same',
        flag: 'test-hook-level',
        doc: 'test hook: its level',
      },
    },
    init: () => undefined,
    exchange: async () => undefined,
  });
  t.ok(
    trainFlags().some(f => f.flag === 'test-hook-level' && f.option.path === 'commHookOptions.level'),
    'its flag',
  );
  t.same(parseTrainArgs(['--test-hook-level', '3']).config.commHookOptions, { level: 3 }, 'parsed into the field');
  t.match(helpText('train'), /--test-hook-level N +test hook: its level/, 'in the help');
  const hook = await resolveCommHook('options-test-hook', { level: 3 });
  t.equal((hook?.options as unknown as Record<string, unknown>).level, 3, 'the hook gets it');
  await t.rejects(resolveCommHook('options-test-hook', { rank: 2 }), { message: /applies to the powersgd hook only/ });
  await t.rejects(resolveCommHook('powersgd', { level: 2 }), {
    message: /applies to the options-test-hook hook only.*leave out --test-hook-level/,
  });
});
