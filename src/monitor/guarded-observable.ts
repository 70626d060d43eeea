/**
 * An Observable whose subscribers cannot crash the process. RxJS rethrows an
 * exception thrown by a subscriber (or an error reaching a subscriber without
 * an error callback) asynchronously, as an uncaught exception: a monitoring
 * callback would end the whole training process. A `GuardedObservable` wraps
 * every observer that subscribes to it, and to every observable piped from it
 * (operators are lifted, so the piped observable is guarded too), so that such
 * an exception goes to `report` instead — once per subscriber; the subscriber
 * keeps receiving values. Internal subscribers of operators pass through.
 */
import { Observable, Subscriber, type Observer, type Operator, type Subscription } from '#rxjs';

/** Where an exception of a subscriber goes: `stream` names the stream it subscribed to. */
export type SubscriberFault = (error: unknown, stream: string) => void;

export class GuardedObservable<T> extends Observable<T> {
  constructor(
    private readonly stream: string,
    private readonly report: SubscriberFault,
    subscribe?: (this: Observable<T>, subscriber: Subscriber<T>) => (() => void) | Subscription | void,
  ) {
    super(subscribe);
  }

  /** Operators build on `lift`: what a guarded stream pipes into is guarded as well. */
  override lift<R>(operator?: Operator<T, R>): Observable<R> {
    const lifted = new GuardedObservable<R>(this.stream, this.report);
    lifted.source = this;
    lifted.operator = operator;
    return lifted;
  }

  override subscribe(
    observerOrNext?: Partial<Observer<T>> | ((value: T) => void) | null,
    error?: ((error: unknown) => void) | null,
    complete?: (() => void) | null,
  ): Subscription {
    if (observerOrNext instanceof Subscriber) return super.subscribe(observerOrNext); // an operator's own subscriber
    const observer: Partial<Observer<T>> =
      typeof observerOrNext === 'function' || observerOrNext == null
        ? { next: observerOrNext ?? undefined, error: error ?? undefined, complete: complete ?? undefined }
        : observerOrNext;
    return super.subscribe(guardObserver(observer, this.stream, this.report));
  }
}

/**
 * The observer, each callback in a try/catch; the first exception goes to `report`, later ones of the same observer are
 * dropped.
 */
function guardObserver<T>(observer: Partial<Observer<T>>, stream: string, report: SubscriberFault): Observer<T> {
  let reported = false;
  const guarded = (call: () => void) => {
    try {
      call();
    } catch (err) {
      if (!reported) {
        reported = true;
        report(err, stream);
      }
    }
  };
  return {
    next: value => guarded(() => observer.next?.(value)),
    // An error reaching a subscriber without an error callback would be rethrown by RxJS: it is reported instead.
    error: err =>
      guarded(() => {
        if (observer.error) observer.error(err);
        else throw err;
      }),
    complete: () => guarded(() => observer.complete?.()),
  };
}
