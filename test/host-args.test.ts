// The hosts of a run, before any thread starts: flags and environment (tandem's, mpirun's, Slurm's), the rendezvous
// address, the topology hosts × devices, and what is refused across hosts yet. No process or socket is started.
import t from 'tap';
import { hostFieldsFromEnv } from '../src/world/host-args.js';
import { parseRendezvous } from '../src/world/rendezvous.js';
import { resolveHosts } from '../src/world/resolve-hosts.js';
import { loadShmAddon } from '../src/collectives/shm/shm-addon.js';
import { loadGlooAddon } from '../src/collectives/gloo/gloo-addon.js';
import { splitLaunchArgs } from '../src/world/launch.js';
import { parseTrainArgs } from '../src/cli/parse-train-args.js';
import { resolveConfig } from '../src/config.js';
import { describeProcess, worldSize } from '../src/world/topology.js';

t.test("flags win over the environment; a launcher's rank and size are read as a pair", async t => {
  t.same(hostFieldsFromEnv({}, {}), {});
  t.same(hostFieldsFromEnv({}, { TANDEM_HOSTS: '3', TANDEM_HOST_RANK: '2', TANDEM_RENDEZVOUS: 'h0:29500' }), {
    hosts: 3,
    hostRank: 2,
    rendezvous: 'h0:29500',
  });
  t.same(hostFieldsFromEnv({ hostRank: 0 }, { OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '2' }), {
    hostRank: 0,
    hosts: 2,
  });
  t.same(hostFieldsFromEnv({}, { SLURM_PROCID: '3', SLURM_NTASKS: '4' }), { hosts: 4, hostRank: 3 });
  t.same(
    hostFieldsFromEnv(
      {},
      { OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '2', SLURM_PROCID: '0', SLURM_NTASKS: '8' },
    ),
    { hosts: 2, hostRank: 1 },
    'one launcher only',
  );
  t.throws(() => hostFieldsFromEnv({}, { SLURM_PROCID: 'x', SLURM_NTASKS: '2' }), {
    code: 'BAD_CONFIG',
    message: /SLURM_PROCID/,
  });
  // Loose numbers Number() reads are refused, naming the variable and its text (0x2 used to be 2 hosts, 1e1 ten).
  for (const [variable, text] of [
    ['TANDEM_HOSTS', '0x2'],
    ['TANDEM_HOST_RANK', ' 1'],
    ['OMPI_COMM_WORLD_SIZE', '2.0'],
    ['SLURM_NTASKS', '1e1'],
    ['SLURM_PROCID', ''],
    ['TANDEM_HOSTS', '-1'],
  ]) {
    const pair = variable.startsWith('TANDEM')
      ? ['TANDEM_HOSTS', 'TANDEM_HOST_RANK']
      : variable.startsWith('OMPI')
        ? ['OMPI_COMM_WORLD_SIZE', 'OMPI_COMM_WORLD_RANK']
        : ['SLURM_NTASKS', 'SLURM_PROCID'];
    const env = { [pair[0]]: '2', [pair[1]]: '1', [variable]: text };
    t.throws(
      () => hostFieldsFromEnv({}, env),
      {
        code: 'BAD_CONFIG',
        message:
          `environment variable ${variable} must be a non-negative integer written as decimal digits (e.g. ` +
          `2), got '${text}'`,
      },
      `${variable}='${text}'`,
    );
  }
  t.same(
    hostFieldsFromEnv({ hosts: 2 }, { TANDEM_HOSTS: '0x2', TANDEM_HOST_RANK: '1' }),
    { hosts: 2, hostRank: 1 },
    'a flag given: its variable is not read',
  );
  t.same(parseTrainArgs(['--hosts', '2', '--host-rank', '1', '--rendezvous', '10.0.0.1:29500']).config, {
    hosts: 2,
    hostRank: 1,
    rendezvous: '10.0.0.1:29500',
  });
});

t.test('rendezvous addresses', async t => {
  t.same(parseRendezvous('rendezvous', '10.0.0.1:29500'), { host: '10.0.0.1', port: 29500 });
  t.same(parseRendezvous('rendezvous', '[::1]:80'), { host: '::1', port: 80 });
  for (const bad of ['10.0.0.1', 'h:0', 'h:70000', ':1', 'a b:1'])
    t.throws(() => parseRendezvous('rendezvous', bad), { code: 'BAD_CONFIG' }, bad);
});

t.test('the topology is hosts × devices; one host is the single-process topology', async t => {
  t.same(resolveHosts({}, 2), { topology: { processes: 1, process: 0, localDevices: 2 } });
  const two = resolveHosts({ hosts: 2, hostRank: 1, rendezvous: '127.0.0.1:5000' }, 3);
  t.same(two.topology, { processes: 2, process: 1, localDevices: 3 });
  t.equal(worldSize(two.topology), 6);
  // A process `tandem launch --gpus` started (TANDEM_GPU_INDEX set, and the job's secret) is a GPU process, and
  // messages name it so.
  const launched = { TANDEM_GPU_INDEX: '1', TANDEM_JOB_SECRET: 'the job secret launch made' };
  const gpu = resolveHosts({ hosts: 2, hostRank: 1, rendezvous: '127.0.0.1:5000' }, 1, launched);
  t.same(gpu.topology, { processes: 2, process: 1, localDevices: 1, processKind: 'gpu' });
  t.same([describeProcess(gpu.topology, 1), describeProcess(two.topology, 1)], ['GPU process 1', 'host 1']);
  t.throws(() => resolveHosts({ hosts: 2 }, 1), { code: 'BAD_CONFIG', message: /rendezvous/ });
  t.throws(() => resolveHosts({ hosts: 2, hostRank: 2, rendezvous: 'h:1' }, 1), {
    code: 'BAD_CONFIG',
    message: /hostRank/,
  });
  t.throws(() => resolveHosts({ rendezvous: 'h:1' }, 1), { code: 'BAD_CONFIG', message: /rendezvous/ });
});

t.test(
  'not yet across hosts: refused before any thread starts, naming the option; local-head and partial-fc resolve, ' +
    'with checkpoints and resume; auto resolves',
  async t => {
    const base = {
      hosts: 2,
      hostRank: 0,
      rendezvous: '127.0.0.1:1',
      devices: 1,
      data: 'synthetic-images',
      imageSize: [8, 8, 1],
      classes: 4,
      datasetSize: 64,
      batch: 8,
    };
    await t.rejects(resolveConfig({ ...base, method: 'squared-error' }), {
      code: 'BAD_CONFIG',
      message: /config\.method: method 'squared-error' does not work across hosts yet/,
    });
    for (const method of ['local-head', 'partial-fc']) {
      const ok = await resolveConfig({ ...base, method });
      t.equal(ok.topology.processes, 2, `${method} runs across hosts`);
      const ckpt = await resolveConfig({ ...base, method, checkpointEvery: 2, out: '/tmp/o', resume: '/tmp/o' });
      t.same([ckpt.checkpointEvery, ckpt.resume], [2, '/tmp/o'], `${method}: checkpoints and resume across hosts`);
      await t.rejects(resolveConfig({ ...base, devices: 2, batch: 8, method, exportDevice: 2 }), {
        code: 'BAD_CONFIG',
        message: /config\.exportDevice: 2 is not on host 0/,
      });
    }
    t.equal(
      (await resolveConfig({ ...base, strategy: 'auto' })).strategy,
      'auto',
      "strategy 'auto' across hosts (host 0 profiles)",
    );
    await t.rejects(resolveConfig({ ...base, transport: 'shared-memory' }), {
      code: 'BAD_CONFIG',
      message: /config\.transport/,
    });
    if (loadGlooAddon().loaded) {
      const across = { ...base, rendezvous: '10.0.0.1:1' }; // another machine's address: processes of several machines
      t.equal((await resolveConfig(across)).transport, 'gloo', 'one device per host: flat gloo by default');
      t.equal(
        (await resolveConfig({ ...across, devices: 2 })).transport,
        'hierarchical',
        'several devices per host: hierarchical by default',
      );
      t.equal(
        (await resolveConfig({ ...base, devices: 2, transport: 'gloo' })).transport,
        'gloo',
        'flat gloo stays selectable',
      );
      if (loadShmAddon().loaded)
        t.equal(
          (await resolveConfig({ ...base, devices: 2 })).transport,
          'shm',
          'a loopback rendezvous (one machine): shm by default',
        );
    }
    await t.rejects(resolveConfig({ ...base, batch: 9 }), {
      code: 'BAD_CONFIG',
      message: /divisible by devices 2 \(2 hosts × 1\)/,
    });
  },
);

t.test(
  'resume across hosts: accepted on every host (host 0 alone reads the checkpoint, so the path need not exist on ' +
    'the others)',
  async t => {
    const base = {
      hosts: 2,
      rendezvous: '127.0.0.1:1',
      devices: 1,
      data: 'synthetic-images',
      imageSize: [8, 8, 1],
      classes: 4,
      datasetSize: 64,
      batch: 8,
    };
    const host1 = await resolveConfig({ ...base, hostRank: 1, resume: '/no/such/dir' });
    t.equal(host1.resume, '/no/such/dir');
  },
);

t.test('host 0 writes the outputs; the others resolve with none', async t => {
  const base = {
    hosts: 2,
    rendezvous: '127.0.0.1:1',
    devices: 1,
    data: 'synthetic-images',
    imageSize: [8, 8, 1],
    classes: 4,
    datasetSize: 64,
    batch: 8,
    out: '/tmp/o',
    trace: '/tmp/t.json',
    checkpointDir: '/tmp/c',
    checkpointEvery: 2,
  };
  const [h0, h1] = await Promise.all([
    resolveConfig({ ...base, hostRank: 0 }),
    resolveConfig({ ...base, hostRank: 1 }),
  ]).catch(err => {
    if (err.message.includes("'gloo' is not available")) return [undefined, undefined];
    throw err;
  });
  if (!h0 || !h1) {
    t.comment('skipped: gloo addon not built');
    return;
  }
  t.same(
    [h0.out, h0.trace, h0.checkpointDir, h0.transport, h0.devices],
    ['/tmp/o', '/tmp/t.json', '/tmp/c', loadShmAddon().loaded ? 'shm' : 'gloo', 2],
  );
  t.same([h1.out, h1.trace, h1.checkpointDir], [undefined, undefined, undefined]);
});

t.test('launch: --hosts taken out, the flags it sets itself refused', async t => {
  t.same(splitLaunchArgs(['--hosts', '2', '--devices', '1']), {
    hosts: 2,
    maxRestarts: 0,
    trainArgs: ['--devices', '1'],
  });
  t.same(splitLaunchArgs(['--devices=1', '--hosts=3']), { hosts: 3, maxRestarts: 0, trainArgs: ['--devices=1'] });
  t.throws(() => splitLaunchArgs(['--devices', '1']), { code: 'BAD_CONFIG', message: /usage/ });
  t.throws(() => splitLaunchArgs(['--hosts', '2', '--host-rank', '1']), { code: 'BAD_CONFIG', message: /--host-rank/ });
  t.throws(() => splitLaunchArgs(['--hosts', 'two']), { code: 'BAD_CONFIG' });
  t.same(splitLaunchArgs(['--hosts', '3', '--max-restarts', '1', '--min-hosts', '2']), {
    hosts: 3,
    maxRestarts: 1,
    trainArgs: ['--min-hosts', '2'],
  });
  t.throws(() => splitLaunchArgs(['--hosts', '3', '--max-restarts', '1']), {
    code: 'BAD_CONFIG',
    message: /--max-restarts restarts a lost host into an elastic run, which admits it again: give --min-hosts M/,
  });
  t.throws(() => splitLaunchArgs(['--hosts', '3', '--max-restarts', 'x', '--min-hosts', '2']), {
    code: 'BAD_CONFIG',
    message: /--max-restarts must be an integer/,
  });
});

t.test(
  'launch --gpus: one host by default; --host-rank and --rendezvous together, for one host of several; --devices ' +
    'refused',
  async t => {
    t.same(splitLaunchArgs(['--gpus', '2', '--steps', '3']), {
      hosts: 1,
      gpus: 2,
      maxRestarts: 0,
      trainArgs: ['--steps', '3'],
    });
    t.same(splitLaunchArgs(['--gpus=4', '--hosts', '3']), { hosts: 3, gpus: 4, maxRestarts: 0, trainArgs: [] });
    t.same(
      splitLaunchArgs(['--gpus', '1', '--model', 'gpus', '--out', 'hosts']),
      { hosts: 1, gpus: 1, maxRestarts: 0, trainArgs: ['--model', 'gpus', '--out', 'hosts'] },
      "only flags are the launcher's",
    );
    t.same(splitLaunchArgs(['--gpus', '2', '--hosts', '2', '--host-rank', '1', '--rendezvous', '10.0.0.1:29500']), {
      hosts: 2,
      gpus: 2,
      hostRank: 1,
      rendezvous: '10.0.0.1:29500',
      maxRestarts: 0,
      trainArgs: [],
    });
    t.throws(() => splitLaunchArgs(['--gpus', '2', '--devices', '2']), {
      code: 'BAD_CONFIG',
      message: /one device; leave out --devices/,
    });
    t.throws(() => splitLaunchArgs(['--gpus', '2', '--hosts', '2', '--host-rank', '1']), {
      code: 'BAD_CONFIG',
      message: /together/,
    });
    t.throws(
      () => splitLaunchArgs(['--gpus', '2', '--host-rank', '0', '--rendezvous', 'h:1']),
      { code: 'BAD_CONFIG', message: /together/ },
      'one host: no rank',
    );
    t.throws(() => splitLaunchArgs(['--gpus', '2', '--hosts', '2', '--host-rank', '2', '--rendezvous', 'h:1']), {
      code: 'BAD_CONFIG',
      message: /\[0, 2\)/,
    });
    t.throws(() => splitLaunchArgs(['--gpus', '0']), {
      code: 'BAD_CONFIG',
      message: /--gpus must be an integer in \[1, 64\]/,
    });
    t.throws(() => splitLaunchArgs(['--gpus', '16', '--hosts', '8']), {
      code: 'BAD_CONFIG',
      message: /128 local processes/,
    });
  },
);

t.test('torchrun / PyTorchJob and Kubernetes Indexed Job variables, with the same precedence', async t => {
  const torchrun = { RANK: '1', WORLD_SIZE: '2', MASTER_ADDR: '10.0.0.1', MASTER_PORT: '29500' };
  t.same(hostFieldsFromEnv({}, torchrun), { hosts: 2, hostRank: 1, rendezvous: '10.0.0.1:29500' });
  t.same(hostFieldsFromEnv({}, { ...torchrun, MASTER_ADDR: 'fd00::1' }).rendezvous, '[fd00::1]:29500', 'IPv6');
  t.same(
    hostFieldsFromEnv({ hostRank: 0, rendezvous: 'h:1' }, torchrun),
    { hostRank: 0, rendezvous: 'h:1', hosts: 2 },
    'flags win',
  );
  t.same(
    hostFieldsFromEnv({}, { ...torchrun, TANDEM_HOSTS: '4', TANDEM_HOST_RANK: '3', TANDEM_RENDEZVOUS: 'h0:7' }),
    { hosts: 4, hostRank: 3, rendezvous: 'h0:7' },
    "tandem's own variables win over torchrun's",
  );
  t.same(
    hostFieldsFromEnv({}, { ...torchrun, SLURM_PROCID: '0', SLURM_NTASKS: '8' }),
    { hosts: 8, hostRank: 0, rendezvous: '10.0.0.1:29500' },
    "Slurm's pair before torchrun's, never mixed",
  );
  t.same(
    hostFieldsFromEnv({}, { JOB_COMPLETION_INDEX: '3', TANDEM_HOSTS: '4', TANDEM_RENDEZVOUS: 'job-0.svc:29500' }),
    { hosts: 4, hostRank: 3, rendezvous: 'job-0.svc:29500' },
    "an Indexed Job's index is the rank; the size comes from TANDEM_HOSTS",
  );
  t.same(
    hostFieldsFromEnv({}, { JOB_COMPLETION_INDEX: '3', RANK: '1', WORLD_SIZE: '2' }),
    { hosts: 2, hostRank: 1 },
    "a launcher's rank wins over the index",
  );
  t.throws(() => hostFieldsFromEnv({}, { JOB_COMPLETION_INDEX: 'a' }), { message: /JOB_COMPLETION_INDEX/ });
  t.throws(() => hostFieldsFromEnv({}, { RANK: '1', WORLD_SIZE: '2.0' }), { message: /WORLD_SIZE.*'2\.0'/ });
  t.throws(() => hostFieldsFromEnv({}, { MASTER_ADDR: '10.0.0.1' }), {
    code: 'BAD_CONFIG',
    message: /MASTER_ADDR is set but MASTER_PORT is not/,
  });
  t.throws(() => hostFieldsFromEnv({}, { ...torchrun, LOCAL_RANK: '2', LOCAL_WORLD_SIZE: '2' }), {
    message: /LOCAL_RANK is 2, not below LOCAL_WORLD_SIZE 2/,
  });
  t.same(hostFieldsFromEnv({}, { ...torchrun, LOCAL_RANK: '0', LOCAL_WORLD_SIZE: '1' }).hostRank, 1);
});

t.test("half of a launcher's pair, or a rank not below its size, is refused naming the variables", async t => {
  const refused: [Record<string, string>, RegExp][] = [
    [{ WORLD_SIZE: '2' }, /WORLD_SIZE is set but RANK is not \(torchrun.*--host-rank/],
    [{ RANK: '1' }, /RANK is set but WORLD_SIZE is not .*--hosts/],
    [{ TANDEM_HOST_RANK: '1', SLURM_PROCID: '1', SLURM_NTASKS: '2' }, /TANDEM_HOST_RANK is set but TANDEM_HOSTS/],
    [{ SLURM_NTASKS: '2' }, /SLURM_NTASKS is set but SLURM_PROCID is not/],
    [{ RANK: '2', WORLD_SIZE: '2' }, /RANK is 2, not below WORLD_SIZE 2/],
    [{ OMPI_COMM_WORLD_RANK: '3', OMPI_COMM_WORLD_SIZE: '2' }, /OMPI_COMM_WORLD_RANK is 3, not below/],
  ];
  for (const [env, message] of refused)
    t.throws(() => hostFieldsFromEnv({}, env), { code: 'BAD_CONFIG', message }, JSON.stringify(env));
  t.throws(
    () => hostFieldsFromEnv({ hosts: 2 }, { SLURM_PROCID: '3', SLURM_NTASKS: '4' }),
    { code: 'BAD_CONFIG', message: /SLURM_PROCID is 3, not below --hosts 2: --hosts wins over SLURM_NTASKS/ },
    "a flag's size and the environment's rank: named as such",
  );
  t.same(hostFieldsFromEnv({ hosts: 2 }, { RANK: '1' }), { hosts: 2, hostRank: 1 }, '--hosts completes RANK');
  t.same(hostFieldsFromEnv({ hostRank: 1 }, { WORLD_SIZE: '2' }), { hosts: 2, hostRank: 1 }, '--host-rank too');
  t.same(hostFieldsFromEnv({}, { TANDEM_HOSTS: '2', JOB_COMPLETION_INDEX: '1' }), { hosts: 2, hostRank: 1 });
});
