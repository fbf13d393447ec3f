import { Module } from '@nestjs/common';
import { ProjectsModule } from '../projects/projects.module';
import { RunsModule } from '../runs/runs.module';
import { UsersModule } from '../users/users.module';
import { EventFollowers } from './event-followers.service';
import { EventsController } from './events.controller';
import { EventsFeedService } from './events-feed.service';
import { EventsModule } from './events.module';
import { EventsRetentionService } from './events-retention.service';

/**
 * The feed's route (pages and SSE followers), the followers' wake-ups (LISTEN/NOTIFY or polling) and retention.
 * Apart from EventsModule (which RunsModule itself uses to record), because these check runs and projects.
 */
@Module({
  imports: [EventsModule, RunsModule, ProjectsModule, UsersModule],
  controllers: [EventsController],
  providers: [EventsFeedService, EventFollowers, EventsRetentionService],
})
export class EventsFeedModule {}
