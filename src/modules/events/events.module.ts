import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Event } from './entities/event.entity';
import { EventsRepository } from './events.repository';
import { EventsService } from './events.service';

/**
 * The event feed's core (table, writes, reads, retention). It depends on no other domain module, so Runs, JobGroups'
 * callers and Workers record through it; the route, the followers and retention's schedule are EventsFeedModule's.
 */
@Module({
  imports: [TypeOrmModule.forFeature([Event])],
  providers: [EventsRepository, EventsService],
  exports: [EventsService],
})
export class EventsModule {}
