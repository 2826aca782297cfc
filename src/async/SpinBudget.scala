package asyncpipe.async

/** An adaptive bound on spinning, for a party that can wait by spinning or by something dearer
  * (parking, waking another thread). Spinning pays when the partner runs on another core and is a
  * step behind; it is pure loss when the partner waits for this very core (one core, a busy
  * machine, or both virtual threads on one carrier: with a fixed budget of 256 spins a rendezvous
  * channel fell from 4 M to 0.13 M ops/s on one carrier). So the budget starts at `max`, halves on
  * every spin that ran out and grows back on spins that paid off; at 0, one wait in `probeEvery`
  * may spin `probe` times, to find out whether spinning pays again.
  *
  * Plain fields: a racy update only nudges the budget. A mixin rather than an object of its own,
  * so that hot paths read the budget without following a pointer. Used by channels (rendezvous
  * waits, doc/adr/0011) and by the multiplexer's tap (retries on a full subscriber, 0018).
  */
private[async] trait SpinBudget(max: Int, probe: Int, probeEvery: Int):
  private var budgetNow: Int = max
  private var waitsWithoutSpin: Int = 0

  /** How many spins a wait may make now. */
  def spinBudget(): Int =
    val b = budgetNow
    if b > 0 then b
    else
      waitsWithoutSpin += 1
      if waitsWithoutSpin % probeEvery == 0 then probe else 0

  /** A spin ended with what it waited for. */
  def spinPaidOff(): Unit =
    val b = budgetNow
    if b < max then budgetNow = math.min(max, b * 2 + probe)

  /** A spin ran out of its budget. */
  def spinWasted(): Unit =
    val b = budgetNow
    if b > 0 then budgetNow = b >> 1
