//! When the pipelined loop takes another batch from the port (self-clocking intake).
//!
//! At saturation every receive returns a full batch and up to `depth` batches' worth of packets
//! are in flight, so the NF core never waits for the tier. Below saturation a receive returns
//! what has arrived (one or two packets at half load on a real port): taking every such crumb as
//! a batch of its own sends the tier a command group per packet or two, up to
//! [`MAX_PIPELINE_DEPTH`] of them per round trip, and the tier's per-command cost then becomes
//! the bottleneck and a queue forms in front of it. So a batch smaller than a full one is taken
//! only while fewer than [`SMALL_IN_FLIGHT`] small batches wait for their first answer from the
//! tier: otherwise arriving packets gather at the port, and the next receive takes what arrived
//! in the meantime (a full batch, and then more, when that is a batch or more). Below saturation,
//! batches grow to what arrives in about one round trip and a packet waits for at most the round
//! trips in flight before its own; at saturation nothing changes.

use super::MAX_PIPELINE_DEPTH;

/// Small batches that may wait for their first answer at once: two, so the tier works on one
/// batch's reads while this core processes the batch before (with one, core and tier take turns
/// and each round trip is as long as both works together: batches, and the wait, grow).
pub(super) const SMALL_IN_FLIGHT: usize = 2;

/// The batches taken from the port and not processed yet, as the intake decision sees them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Queued {
    /// Batches received, reads sent (or none to send), not processed.
    pub batches: usize,
    /// Their packets.
    pub packets: usize,
    /// Batches (received or processed) smaller than a full batch whose first round trip to the
    /// tier is not answered yet: their reads, or for a batch that reads nothing its writes.
    pub small_waiting: usize,
}

/// What the loop does about the port now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Intake {
    /// Receive a batch (without waiting when anything is in flight) and send its reads.
    Take,
    /// Leave arriving packets at the port until a reply comes in.
    Wait,
}

/// Whether a queue of `batches` batches holding `packets` packets may take one more batch: up
/// to `depth` full batches' worth of packets, in at most [`MAX_PIPELINE_DEPTH`] batches (small
/// batches count by their packets, so the depth caps what is in flight, not how it is cut).
pub(super) fn has_room(batches: usize, packets: usize, depth: usize, batch_size: usize) -> bool {
    batches < MAX_PIPELINE_DEPTH && packets + batch_size <= depth * batch_size
}

/// The intake decision for the unprocessed batches `q` (see the module docs).
pub(super) fn intake(q: Queued, depth: usize, batch_size: usize) -> Intake {
    if q.small_waiting < SMALL_IN_FLIGHT && has_room(q.batches, q.packets, depth, batch_size) {
        Intake::Take
    } else {
        Intake::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(batches: usize, packets: usize, small_waiting: usize) -> Queued {
        Queued {
            batches,
            packets,
            small_waiting,
        }
    }

    #[test]
    fn an_idle_pipeline_takes() {
        assert_eq!(intake(q(0, 0, 0), 8, 32), Intake::Take);
        assert_eq!(intake(q(0, 0, 0), 1, 32), Intake::Take);
    }

    #[test]
    fn full_batches_fill_the_depth_and_no_more() {
        for n in 0..8 {
            assert_eq!(
                intake(q(n, n * 32, 0), 8, 32),
                Intake::Take,
                "{n} in flight"
            );
        }
        assert_eq!(intake(q(8, 256, 0), 8, 32), Intake::Wait);
    }

    #[test]
    fn small_batches_waiting_for_their_answer_hold_the_intake() {
        assert_eq!(SMALL_IN_FLIGHT, 2);
        assert_eq!(intake(q(1, 2, 1), 8, 32), Intake::Take);
        assert_eq!(intake(q(2, 3, 2), 8, 32), Intake::Wait);
        // Full batches beside them do not change that.
        assert_eq!(intake(q(4, 67, 2), 8, 32), Intake::Wait);
        // One answered (processed, or reading nothing and acknowledged): taking again.
        assert_eq!(intake(q(2, 3, 1), 8, 32), Intake::Take);
    }

    #[test]
    fn small_batches_are_counted_by_their_packets_up_to_the_batch_cap() {
        // 63 one-packet batches are far below depth x batch packets, yet the batch cap holds.
        assert_eq!(intake(q(63, 63, 0), 8, 32), Intake::Take);
        assert_eq!(intake(q(MAX_PIPELINE_DEPTH, 64, 0), 8, 32), Intake::Wait);
        // One packet short of a full batch of room.
        assert_eq!(intake(q(7, 225, 0), 8, 32), Intake::Wait);
        assert_eq!(intake(q(7, 224, 0), 8, 32), Intake::Take);
    }

    #[test]
    fn room_is_the_depth_in_full_batches() {
        assert!(has_room(0, 0, 1, 32));
        assert!(!has_room(1, 1, 1, 32));
        assert!(has_room(1, 32, 2, 32));
        assert!(!has_room(2, 33, 2, 32));
    }
}
