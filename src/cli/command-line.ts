/** The `tandem` command line: one function per command; `--help` for each, generated from the declarations. */
import { TandemError } from '../errors.js';
import { withFlagName } from './parse-train-args.js';
import { traceCommand } from './trace-command.js';
import { dashboardCommand } from './dashboard-command.js';
import { guardStdio } from './stdio-guard.js';
import { launchHosts } from '../world/launch.js';
import { checkTrainArgs, trainCommand } from './train-command.js';
import { profileCommand } from './profile-command.js';
import { helpText, type HelpCommand } from './help-text.js';
import { loadCliPlugins } from './cli-plugins.js';

const COMMANDS: readonly HelpCommand[] = ['train', 'launch', 'profile', 'trace', 'dashboard'];

function launchCommand(args: string[]): Promise<number> {
  return launchHosts(
    args,
    (prefix, line) => (line.stream === 'stderr' ? process.stderr : process.stdout).write(`[${prefix}] ${line.text}\n`),
    line => console.error(`tandem launch: ${line}`),
    trainArgs => checkTrainArgs(trainArgs, line => console.error(`tandem launch: ${line}`)),
  );
}

/** `tandem COMMAND --help`: that command's help (the plugins it names first: their options are in it). */
async function help(command: string | undefined, args: string[]): Promise<number> {
  const known = COMMANDS.find(c => c === command);
  if (known === 'train' || known === 'profile' || known === 'launch') await loadCliPlugins(args);
  console.log(helpText(known));
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (rest.includes('--help') || rest.includes('-h')) return help(command, rest);
  switch (command) {
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      return help(rest[0], rest);
    case 'train':
      return trainCommand(rest);
    case 'launch':
      return launchCommand(rest);
    case 'trace':
      return traceCommand(rest);
    case 'profile':
      return profileCommand(rest);
    case 'dashboard':
      return dashboardCommand(rest);
    default:
      throw new TandemError(
        'BAD_CONFIG',
        `unknown command '${command}'. Commands: train, launch, trace, profile, dashboard. See tandem --help.`,
      );
  }
}

guardStdio();
main(process.argv.slice(2)).then(
  code => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof TandemError) console.error(`tandem: ${withFlagName(err.message)}`);
    else console.error(err);
    process.exitCode = 1;
  },
);
