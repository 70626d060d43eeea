/** The prose of `--help` that is not an option: what each command does, signals, several hosts, launch. */
import { BUILTIN_MODELS } from '../model/builtin-models.js';

/** The built-in models, as `--model` takes them (from the table, so that a new one is listed). */
const MODELS = Object.keys(BUILTIN_MODELS).join(', ');

export const COMMANDS = `\
Commands:
  tandem train [flags…]                    train on this machine's devices (tandem train --help)
  tandem launch --hosts N [train flags…]   N local processes joined as hosts (tandem launch --help)
  tandem launch --gpus N [train flags…]    a process per GPU of this machine
  tandem profile --model NAME|PATH [flags…]  per-layer times, the AlexNet-like verdict, predicted step times
  tandem trace TRACE.json --svg OUT.svg    draw a trace written by --trace or --out (tandem trace --help)
  tandem dashboard RUN_DIR [--port P]      serve the dashboard of a finished run (its --out) in the browser

Models: ${MODELS}, an ES module
        (tf, options) => tf.LayersModel, or a TensorFlow.js layers model.json (trained from its weights and
        written back in the same format).
Data:   mnist, synthetic-images, an image folder (a subfolder per class), a CSV file (--label-column), or an
        ES module (options) => Dataset or a tf.data.Dataset of batches.`;

export const TRAIN_USAGE = `\
tandem train — train a TensorFlow.js model on several devices at once

usage: tandem train [--config FILE.json] [flags…]`;

export const TRAIN_NOTES = `\
Each flag once (--plugin repeats); counts in decimal digits (--steps 200), real values also in exponent
notation (--lr 1e-3). tfjs's optimizers take their own hyper-parameters only: sgd/momentum --momentum --nesterov;
adam --beta1 --beta2 --epsilon; rmsprop --decay --momentum --epsilon --centered; adagrad --initial-accumulator;
adamax --beta1 --beta2 --epsilon --decay; adadelta --rho --epsilon.

Signals: SIGINT/SIGTERM/SIGHUP finish the current step, write a checkpoint (to --checkpoint-dir or --out) and exit
with 130/143/129; a second one (or the step still running after --stop-grace-ms) aborts the step and checkpoints the
last completed step. Output to a closed pipe (| head) is dropped; training goes on.

--strategy auto profiles first (across hosts: every host times all-reduces over the host link, α + β·bytes), then
picks the schedule the cost model predicts fastest (strategy, --forward-wait, --exchange-order, --chunk-floats);
--comm-hook auto lets it pick a hook too (fp16, powersgd: they change the loss; default: no hook).

Several hosts (transport hierarchical, or gloo with --transport gloo; shm when the rendezvous is loopback: one
machine): every host runs the same command with
  --hosts N --host-rank R --rendezvous HOST:PORT   (host 0's address; host 0 serves the store there)
(or TANDEM_HOSTS, TANDEM_HOST_RANK, TANDEM_RENDEZVOUS; rank and size also from mpirun's OMPI_COMM_WORLD_RANK/SIZE
or Slurm's SLURM_PROCID/NTASKS). --devices is the devices per host; --batch the global batch over all hosts.
Host 0 shows the world (metrics over every device, every host's warnings; --trace: a process per host); the other
hosts print warnings, errors and a final line (--verbose: their own progress too).`;

export const LAUNCH_HELP = `\
tandem launch — start the processes of a job on this machine, joined as hosts

usage:
  tandem launch --hosts N [train flags…]   (N local processes on 127.0.0.1, output prefixed [host R]; one failing
               ends all; the train flags are checked as train checks them before any process starts)
  tandem launch --gpus N [train flags…]    (a process per GPU of this machine, each pinned to its GPU and one device,
               joined like hosts, output prefixed [gpu K]; no GPU: N processes share the software Vulkan driver)
  tandem launch --gpus N --hosts H --host-rank R --rendezvous HOST:PORT [train flags…]
               (on each of H machines: its N GPU processes, ranks R×N…R×N+N-1; without --host-rank: H×N local
               processes)

Launch arguments:
  --hosts N                  processes (or, with --gpus, machines) in the job
  --gpus N                   a process per GPU, each with one device (leave out --devices)
  --host-rank R              with --gpus on one machine of several: this machine's rank
  --rendezvous HOST:PORT     with --gpus on one machine of several: host 0's address
  --max-restarts K           an elastic run (--min-hosts): start a failed process (not host 0) again, up to K times;
                             it rejoins the run at the next step boundary (default 0: one failing ends all)

Train flags: every flag of tandem train (tandem train --help), but those the launcher sets for each process.`;

export const PROFILE_USAGE = `\
tandem profile — time a model's layers, decide whether it is AlexNet-like, predict each strategy's step time

usage: tandem profile --model NAME|PATH [--data …] [--batch GLOBAL] [--devices N] [--steps N]
               [--time-share X] [--param-share X] [--link BANDWIDTH] [--json]
  --steps: the measured steps (not training steps). It takes every train flag below; one process (no --hosts).`;

export const TRACE_HELP = `\
tandem trace — draw a Chrome trace as a picture

usage: tandem trace TRACE.json --svg OUT.svg [--png OUT.png] [--steps A..B | --last N | --all]

Trace arguments:
  --svg OUT.svg              write the picture as SVG
  --png OUT.png              write it as PNG
  --steps A..B               draw steps A to B
  --last N                   draw the last N steps (default 3)
  --all                      draw every step`;

export const DASHBOARD_HELP = `\
tandem dashboard — serve the dashboard of a finished run: its charts, timeline, events and configuration

usage: tandem dashboard RUN_DIR [--port P] [--host ADDRESS]
  RUN_DIR: a run's --out (summary.json; events.jsonl and trace.json when there). Prints the page's address and
  serves it until Ctrl-C. A live run serves the same page: tandem train … --dashboard [PORT].

Dashboard arguments:
  --port P                   the port (default: a free one, printed)
  --host ADDRESS             the address to listen on (default 127.0.0.1; any other needs the token printed in
                             the URL)`;
