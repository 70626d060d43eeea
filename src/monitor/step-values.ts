/** What every view of a run (progress lines, TensorBoard, the dashboard) shows of one step. */
export interface StepValues {
  step: number;
  loss: number;
  accuracy: number;
  /** The learning rate this step's update used (the schedule's, else the optimizer's). */
  lr: number;
  samplesPerSecond: number;
  /**
   * ms since the previous step ended (the first step: since it began): the step's period, what it cost in wall time,
   * with whatever the loop did after the step before (a checkpoint, the hosts' stop agreement, a replica check).
   */
  stepMs: number;
  /** Per device: compute-thread ms (forward+backward+handoff). */
  computeMs: number[];
  /**
   * ms the step loop waited for inputs during the step (its own, or the next step's not loaded ahead in time); several
   * hosts: the longest wait of any host.
   */
  dataWaitMs: number;
}
